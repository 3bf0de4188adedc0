/* fdio.h — whole buffers to and from file descriptors (pipes, files opened with open()),
 * retrying the short transfers and interruptions (EINTR) that write() and read() may give;
 * whether two paths are one file. */
#ifndef NPUSIM_BASE_FDIO_H
#define NPUSIM_BASE_FDIO_H

#include <stdbool.h>
#include <stddef.h>

/* Writes all n bytes of buf to fd. False (errno set by write) when a write fails or writes
 * nothing. */
bool np_write_all(int fd, const void *buf, size_t n);

/* Reads from fd until n bytes are in buf or the end of the input comes first. The bytes read
 * (n unless the input ended; less also when a read fails, errno set). */
size_t np_read_full(int fd, void *buf, size_t n);

/* Whether paths a and b name one existing file (the same device and inode: a link, another
 * spelling or ./ of it too). False when either does not exist. */
bool np_same_file(const char *a, const char *b);

#endif
