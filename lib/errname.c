/* SPDX-License-Identifier: MIT */
#include "lib/util.h"

#include <stdarg.h>

const char *errno_name(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return "OK";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EROFS: return "EROFS";
	case ERANGE: return "ERANGE";
	case EFBIG: return "EFBIG";
	case ENOSYS: return "ENOSYS";
	case ENODATA: return "ENODATA";
	case ETIME: return "ETIME";
	case EBADMSG: return "EBADMSG";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECANCELED: return "ECANCELED";
	case EHWPOISON: return "EHWPOISON";
	case ESTALE: return "ESTALE";
	case EALREADY: return "EALREADY";
	case EPROTO: return "EPROTO";
	case EMSGSIZE: return "EMSGSIZE";
	case ENOTCONN: return "ENOTCONN";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case ENOTEMPTY: return "ENOTEMPTY";
	case ELOOP: return "ELOOP";
	case EXDEV: return "EXDEV";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	default: return "E?";
	}
}

int errbuf_set(char *err, size_t len, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return code;
}
