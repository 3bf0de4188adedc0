/* fdio.c — whole buffers to and from file descriptors (see fdio.h). */
#include "fdio.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

bool np_write_all(int fd, const void *buf, size_t n)
{
    const char *b = buf;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k, n -= (size_t)k;
    }
    return true;
}

size_t np_read_full(int fd, void *buf, size_t n)
{
    char *b = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}

bool np_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
