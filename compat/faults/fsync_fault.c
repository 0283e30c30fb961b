/*
 * A disk whose flushes fail or are slow, for the processes this library is preloaded into.
 *
 * Failing: fsync(2) and fdatasync(2) return -1 with errno EIO from the moment the file named by
 * $KWIRE_FAULT_FSYNC_EIO exists, and flush as usual before. A failed flush also loses what it
 * could not write back, as a device error does: a regular file is cut back to the size it had
 * at its last successful flush through this library (Linux drops the dirty pages of a failed
 * writeback and reports the error once). So data that a process took as durable without a
 * successful fsync is gone when it restarts, and a checker can see it.
 *
 * Slow: while the file named by $KWIRE_FAULT_FSYNC_DELAY exists and holds a number of
 * milliseconds, each fsync and fdatasync first waits that long, then flushes: a device whose
 * write-back has slowed down (a saturated or failing disk), which every durable append waits on.
 *
 * Loaded with LD_PRELOAD into a server process (a kwire node, or a stock Kafka JVM: its
 * FileChannel.force goes through libc's fdatasync/fsync). Creating or removing a trigger file
 * turns a fault on or off while the process runs.
 *
 * Build: cc -shared -fPIC -O2 -o fsync_fault.so fsync_fault.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACKED 4096

/* per file descriptor: the file (device, inode) and its size at its last successful flush */
static struct { dev_t dev; ino_t ino; off_t size; int known; } synced[TRACKED];

static int failing(void) {
    const char *trigger = getenv("KWIRE_FAULT_FSYNC_EIO");
    return trigger != NULL && trigger[0] != '\0' && access(trigger, F_OK) == 0;
}

/* the delay the trigger file asks for, in milliseconds (0: none) */
static long delay_ms(void) {
    const char *trigger = getenv("KWIRE_FAULT_FSYNC_DELAY");
    if (trigger == NULL || trigger[0] == '\0') return 0;
    int fd = open(trigger, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    long ms = strtol(text, NULL, 10);
    return ms > 0 ? ms : 0;
}

static void wait_ms(long ms) {
    struct timespec left = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&left, &left) != 0 && errno == EINTR) { }
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
    int saved = errno;
    long ms = delay_ms();
    if (ms > 0) wait_ms(ms);
    errno = saved;
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
