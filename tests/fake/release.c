/* Linked into the fake NCCL of one release ($(BUILD)/fake-rel/CODE/, tests/fake/fake.mk): that release's
 * version code, which the fake then behaves as (FAKE_NCCL_VERSION is not read). */
int fake_release = FAKE_RELEASE;
