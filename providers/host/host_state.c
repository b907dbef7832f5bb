/* SPDX-License-Identifier: MIT */
/*
 * Generations per domain: STATE_DIR/<domain>.json = {"domain": ..,
 * "generation": N}, written with file_write_atomic(); a per-domain lock file
 * (flock) serializes two memgrant-host processes.  Domain names are kept
 * readable in file names; bytes other than [A-Za-z0-9_+-] and a leading '.'
 * are written as %XX.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "lib/fileio.h"
#include "lib/util.h"
#include "lib/wire/message.h"
#include "providers/host/host.h"

#define STATE_MAX 65536

static void why_set(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

int host_state_path(const char *dir, const char *domain, const char *ext, char **out)
{
	size_t n = strlen(domain);
	_cleanup_free_ char *name = malloc(n * 3 + 1);
	char *q = name;

	if (!name)
		return -ENOMEM;
	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)domain[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		    c == '-' || c == '+' || (c == '.' && i > 0))
			*q++ = (char)c;
		else
			q += sprintf(q, "%%%02X", c);
	}
	*q = '\0';
	return asprintf(out, "%s/%s%s", dir, name, ext) < 0 ? -ENOMEM : 0;
}

static int read_generation(const char *path, uint64_t *out, char *why, size_t why_len)
{
	_cleanup_free_ char *text = NULL;
	json_error_t jerr;
	json_t *root, *g;
	size_t len;
	int r;

	*out = 0;
	r = file_read_all(path, STATE_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		why_set(why, why_len, "%s: %s", path, strerror(-r));
		return r;
	}
	root = json_loadb(text, len, 0, &jerr);
	g = json_object_get(root, "generation");
	if (!json_is_integer(g) || json_integer_value(g) < 0) {
		why_set(why, why_len, "%s: not a memgrant-host state file (%s); move it away to start over", path,
			root ? "no \"generation\"" : jerr.text);
		json_decref(root);
		return -EBADMSG;
	}
	if ((uint64_t)json_integer_value(g) >= MSG_GENERATION_MAX) {
		/* the next one would be beyond what the agent accepts: every grant refused */
		why_set(why, why_len, "%s: generation %lld is at or above the protocol's maximum 2^53; move the file "
			"away to start over", path, (long long)json_integer_value(g));
		json_decref(root);
		return -ERANGE;
	}
	*out = (uint64_t)json_integer_value(g);
	json_decref(root);
	return 0;
}

int host_state_last_generation(const char *state_dir, const char *domain, uint64_t *out, char *why,
			       size_t why_len)
{
	_cleanup_free_ char *path = NULL;
	int r = host_state_path(state_dir, domain, ".json", &path);

	if (r < 0) {
		why_set(why, why_len, "bad domain name");
		return r;
	}
	return read_generation(path, out, why, why_len);
}

int host_state_next_generation(const char *state_dir, const char *domain, uint64_t agent_last, uint64_t *out,
			       char *why, size_t why_len)
{
	_cleanup_free_ char *path = NULL, *lock = NULL, *text = NULL;
	_cleanup_close_ int lfd = -1;
	uint64_t last = 0, next;
	json_t *root;
	int r;

	r = mkdir_p(state_dir, 0755);
	if (r < 0) {
		why_set(why, why_len, "cannot create the state directory %s: %s", state_dir, strerror(-r));
		return r;
	}
	if (host_state_path(state_dir, domain, ".json", &path) < 0 || host_state_path(state_dir, domain, ".lock", &lock) < 0) {
		why_set(why, why_len, "bad domain name");
		return -EINVAL;
	}
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
		why_set(why, why_len, "%s: %s", lock, strerror(errno));
		return -errno;
	}
	r = read_generation(path, &last, why, why_len);
	if (r < 0)
		return r;
	next = (last > agent_last ? last : agent_last) + 1;
	if (next > (1ULL << 53)) {
		why_set(why, why_len, "%s: generations exhausted", path);
		return -ERANGE;
	}
	root = json_pack("{s:s,s:I}", "domain", domain, "generation", (json_int_t)next);
	text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
	json_decref(root);
	if (!text)
		return -ENOMEM;
	r = file_write_atomic(path, text, strlen(text), 0644);
	if (r < 0) {
		why_set(why, why_len, "cannot write %s: %s", path, strerror(-r));
		return r;
	}
	*out = next;
	return 0; /* the lock goes with lfd */
}
