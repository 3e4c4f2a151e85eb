/*
 * synclog.c: a preload for serve_websocket_spec. Each fsync, fdatasync or
 * syncfs of the process that returns adds the line "sync" to the file
 * EUTAXY_SYNC_LOG names, so that the spec can tell the order of a
 * server's syncs and what its clients received (the clients write their
 * lines to the same file). One write(2) of a whole line to a file opened
 * with O_APPEND: lines from several threads and processes do not mix.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static void note(void) {
  const char *path = getenv("EUTAXY_SYNC_LOG");
  int fd;
  if (!path || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) return;
  if (write(fd, "sync\n", 5) < 0) {
    /* nothing to tell: the spec sees a sync missing */
  }
  close(fd);
}

#define WRAP(name)                                              \
  int name(int fd) {                                            \
    static int (*real)(int);                                    \
    int rc, saved;                                              \
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, #name);    \
    rc = real ? real(fd) : -1;                                  \
    saved = errno;                                              \
    note();                                                     \
    errno = saved;                                              \
    return rc;                                                  \
  }

WRAP(fsync)
WRAP(fdatasync)
WRAP(syncfs)
