/*
 * A disk whose flushes fail: fsync(2) and fdatasync(2) return -1 with errno EIO from the
 * moment the file named by $KWIRE_FAULT_FSYNC_EIO exists, and flush as usual before.
 *
 * A failed flush also loses what it could not write back, as a device error does: a regular
 * file is cut back to the size it had at its last successful flush through this library
 * (Linux drops the dirty pages of a failed writeback and reports the error once). So data
 * that a process took as durable without a successful fsync is gone when it restarts, and a
 * checker can see it.
 *
 * Loaded with LD_PRELOAD into a server process (a kwire node, or a stock Kafka JVM: its
 * FileChannel.force goes through libc's fdatasync/fsync). Creating the trigger file turns
 * the fault on while the process runs.
 *
 * Build: cc -shared -fPIC -O2 -o fsync_eio.so fsync_eio.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACKED 4096

/* per file descriptor: the file (device, inode) and its size at its last successful flush */
static struct { dev_t dev; ino_t ino; off_t size; int known; } synced[TRACKED];

static int failing(void) {
    const char *trigger = getenv("KWIRE_FAULT_FSYNC_EIO");
    return trigger != NULL && trigger[0] != '\0' && access(trigger, F_OK) == 0;
}

static void note_synced(int fd) {
    struct stat st;
    if (fd < 0 || fd >= TRACKED || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    synced[fd].dev = st.st_dev;
    synced[fd].ino = st.st_ino;
    synced[fd].size = st.st_size;
    synced[fd].known = 1;
}

static int fail(int fd) {
    struct stat st;
    if (fd >= 0 && fd < TRACKED && synced[fd].known && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
            && st.st_dev == synced[fd].dev && st.st_ino == synced[fd].ino && st.st_size > synced[fd].size) {
        if (ftruncate(fd, synced[fd].size) != 0) { /* nothing more to lose */ }
    }
    errno = EIO;
    return -1;
}

static int flush_through(int (*real)(int), int fd) {
    if (failing()) return fail(fd);
    int done = real(fd);
    if (done == 0) note_synced(fd);
    return done;
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return flush_through(real, fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return flush_through(real, fd);
}
