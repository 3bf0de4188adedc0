/* readfile.h — reading a whole input file with a size cap, the way every reader of outside
 * files does it (configs, models, assembly, SCALE-Sim files, topologies).
 *
 * The file must be a regular file (or a pipe such as /dev/stdin: then the cap alone bounds
 * it); a directory, a device such as /dev/zero or a file larger than the cap is refused
 * before more than max_bytes + 1 bytes are read, with a message naming the file.
 */
#ifndef NPUSIM_READFILE_H
#define NPUSIM_READFILE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Reads path whole into a new NUL-terminated buffer (*text, free() it; *len bytes without the
 * NUL). A file of exactly max_bytes is read; one byte more is NP_ERR_RANGE "PATH: larger than
 * SIZE (the limit for WHAT; ...)". NP_ERR_IO when it cannot be opened or read, or is a
 * directory or a device; NP_ERR_NOMEM. *text is NULL on failure. what names the kind of
 * file in messages ("a model file"). */
np_status np_read_file(const char *path, uint64_t max_bytes, const char *what, char **text,
                       size_t *len, np_err *err);

#endif
