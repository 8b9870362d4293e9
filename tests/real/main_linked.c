/* Linked directly against libnccluser.so (and so libnccl): RTLD_NEXT finds NCCL. */
int user_run(void);
int main(void) { return user_run(); }
