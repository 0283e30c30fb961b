/*
 * A disk whose flushes fail: fsync(2) and fdatasync(2) return -1 with errno EIO from the
 * moment the file named by $KWIRE_FAULT_FSYNC_EIO exists, and flush as usual before.
 *
 * Loaded with LD_PRELOAD into a server process (a kwire node, or a stock Kafka JVM: its
 * FileChannel.force goes through libc's fdatasync/fsync), so the failure is the one the
 * kernel reports when a device cannot write back dirty pages. Creating the trigger file
 * turns the fault on while the process runs.
 *
 * Build: cc -shared -fPIC -O2 -o fsync_eio.so fsync_eio.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int failing(void) {
    const char *trigger = getenv("KWIRE_FAULT_FSYNC_EIO");
    return trigger != NULL && trigger[0] != '\0' && access(trigger, F_OK) == 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (failing()) {
        errno = EIO;
        return -1;
    }
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (failing()) {
        errno = EIO;
        return -1;
    }
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
