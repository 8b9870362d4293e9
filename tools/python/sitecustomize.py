# ncclguard's Python start-up hook, put on PYTHONPATH by ncclguard-run (tools/python/README.md).
# All the work is in the ncclguard_hook package; this file must stay tiny and must never fail.
# It also runs the sitecustomize that this directory shadows, if there is one.
try:
    import ncclguard_hook as _ncclguard_hook
except Exception:  # noqa: BLE001 - a broken install must not break Python start-up
    _ncclguard_hook = None
if _ncclguard_hook is not None:
    _ncclguard_hook.start(__file__)
del _ncclguard_hook
