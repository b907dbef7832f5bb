/* SPDX-License-Identifier: MIT */
/*
 * The credential files of a configuration (providers.https.ca_file,
 * cert_file, key_file, token_file; hooks[N].secret_file): their fixed list
 * (config_credentials) and what --check-config says about them, judged the
 * way the running agent will get them (docs/security.md, "Credentials"):
 *
 * - memgrantd started as root for an agent of another user: a file no
 *   folder of which that user can change is opened by the root helper,
 *   which is root WITHOUT capabilities: root must own a root-only file.  It
 *   is tried that way, in a child that drops its capabilities.  A file in a
 *   folder the agent's user can change is not handed out by the helper: the
 *   agent must read it itself, tried as the agent.
 * - otherwise the agent is this user: tried here.
 * - the client certificate must parse, be valid now, and the key must be
 *   its key (libcrypto); config_cert_days() gives the days left.
 *
 * Each refusal names the key, the file and the fix.
 */
#include "config/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hotplug/privsep/cred_channel.h"
#include "lib/credstore.h"
#include "lib/crypto_dl.h"
#include "lib/util.h"

int config_credentials(const struct mg_config *cfg, struct cred_store *out)
{
	const struct mg_https_config *h = &cfg->providers.https;
	int r = 0;

	if (h->enabled) {
		r = cred_store_add(out, "providers.https.ca_file", h->ca_file);
		if (r == 0)
			r = cred_store_add(out, "providers.https.cert_file", h->cert_file);
		if (r == 0)
			r = cred_store_add(out, "providers.https.key_file", h->key_file);
		if (r == 0)
			r = cred_store_add(out, "providers.https.token_file", h->token_file);
	}
	for (size_t i = 0; r == 0 && i < cfg->n_hooks; i++) {
		char key[64];

		snprintf(key, sizeof(key), "hooks[%zu].secret_file", i);
		r = cred_store_add(out, key, cfg->hooks[i].secret_file);
	}
	return r;
}

/* open(PATH) as root without capabilities, as the helper does: 0 or a
 * positive errno (negative: the child could not be made). */
static int helper_open(const char *path)
{
	int fds[2], st = 0, e = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork(); /* --check-config runs before any thread starts */
	if (pid < 0) {
		e = -errno;
		close(fds[0]);
		close(fds[1]);
		return e;
	}
	if (pid == 0) {
		struct __user_cap_header_struct hd = { .version = _LINUX_CAPABILITY_VERSION_3 };
		struct __user_cap_data_struct data[2] = { { 0 } };
		int fd;

		close(fds[0]);
		if (syscall(SYS_capset, &hd, data) < 0) {
			e = -errno;
		} else {
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			if (fd < 0)
				e = errno;
			else
				close(fd);
		}
		if (write(fds[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &e, sizeof(e)) != (ssize_t)sizeof(e))
		e = -EIO;
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return e;
}

static void owner_of(const char *path, char *buf, size_t len)
{
	struct stat st;

	if (stat(path, &st) == 0)
		snprintf(buf, len, "owner uid %u gid %u, mode %04o", (unsigned)st.st_uid, (unsigned)st.st_gid,
			 (unsigned)(st.st_mode & 07777));
	else
		snprintf(buf, len, "%s", strerror(errno));
}

/* KEY = PATH, needed for NEEDED: can the agent get it?  True when it can. */
static bool check_one(struct ctx *c, const struct agent_view *v, const char *key, const char *path, const char *needed)
{
	char why[512], own[96];
	struct stat st;
	int e, fd;

	if (geteuid() == 0 && v->known && v->other) {
		if (ph_cred_path_safe(path, v->uid, v->groups, v->n_groups, why, sizeof(why))) {
			e = helper_open(path);
			if (e == 0)
				goto regular;
			if (e == ENOENT) {
				cfg_err_at(c, cfg_where(c, key), "%s: %s: no such file; %s", key, path, needed);
				return false;
			}
			owner_of(path, own, sizeof(own));
			cfg_err_at(c, cfg_where(c, key),
				   "%s: %s: the root helper, which opens it for the agent (root without capabilities), "
				   "cannot: %s (%s; %s); %s; make root its owner: chown root:root %s; chmod 0600 %s",
				   key, path, e > 0 ? strerror(e) : "cannot drop the capabilities to try",
				   e > 0 ? errno_name(e) : "", own, needed, path, path);
			return false;
		}
		e = cfg_agent_access(v, path, R_OK);
		if (e == 0)
			goto regular;
		cfg_err_at(c, cfg_where(c, key),
			   "%s: %s: %s, so the root helper does not hand it to the agent, and the agent (user %s) "
			   "cannot read it itself: %s; keep it in a folder only root can change, e.g. /etc/memgrant "
			   "(root:root 0600), see Credentials in docs/security.md; %s",
			   key, path, why, v->user, e > 0 ? strerror(e) : "cannot take its identity", needed);
		return false;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		e = errno;
		cfg_err_at(c, cfg_where(c, key), "%s: %s: %s (%s); %s", key, path,
			   e == ENOENT ? "no such file" : strerror(e), errno_name(e), needed);
		return false;
	}
	close(fd);
regular:
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s is %s; %s", key, path,
			   S_ISDIR(st.st_mode) ? "a folder, not a file" : "not a regular file", needed);
		return false;
	}
	return true;
}

static X509 *load_cert(const char *path, char *why, size_t len)
{
	FILE *f;
	X509 *x;

	if (crypto_dl_load(why, len) < 0) /* libcrypto reads it */
		return NULL;
	f = fopen(path, "re");
	if (!f) {
		snprintf(why, len, "%s", strerror(errno));
		return NULL;
	}
	x = sym_PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (!x)
		crypto_dl_error_text(why, len);
	return x;
}

/* No passphrase prompt: memgrantd cannot answer one either. */
static int no_pass(char *buf, int size, int rw, void *u)
{
	(void)buf, (void)size, (void)rw, (void)u;
	return -1;
}

static EVP_PKEY *load_key(const char *path, char *why, size_t len)
{
	FILE *f;
	EVP_PKEY *k;

	if (crypto_dl_load(why, len) < 0) /* libcrypto reads it */
		return NULL;
	f = fopen(path, "re");
	if (!f) {
		snprintf(why, len, "%s", strerror(errno));
		return NULL;
	}
	k = sym_PEM_read_PrivateKey(f, NULL, no_pass, NULL);
	fclose(f);
	if (!k)
		crypto_dl_error_text(why, len);
	return k;
}

int config_cert_days(const char *path, long *days, char *until, size_t len)
{
	char why[256];
	X509 *x = load_cert(path, why, sizeof(why));
	int d = 0, s = 0;
	struct tm tm;
	int r = -EINVAL;

	if (!x)
		return -EINVAL;
	if (sym_ASN1_TIME_to_tm(sym_X509_get0_notAfter(x), &tm) == 1 && sym_ASN1_TIME_diff(&d, &s, NULL, sym_X509_get0_notAfter(x)) == 1) {
		strftime(until, len, "%Y-%m-%d %H:%M UTC", &tm);
		*days = d; /* whole days left, negative once expired */
		if (d == 0 && s < 0)
			*days = -1;
		r = 0;
	}
	sym_X509_free(x);
	return r;
}

/* The client certificate: parses, valid now, KEY_PATH holds its key. */
static void check_pair(struct ctx *c, const char *cert_path, const char *key_key, const char *key_path)
{
	char why[256], until[64];
	X509 *x;
	EVP_PKEY *k;
	long days;

	x = load_cert(cert_path, why, sizeof(why));
	if (!x) {
		cfg_err_at(c, cfg_where(c, "providers.https.cert_file"),
			   "providers.https.cert_file: %s is not a PEM certificate (%s); the agent could not connect to "
			   "the control plane; install the certificate in PEM form", cert_path, why);
		return;
	}
	if (sym_X509_cmp_time(sym_X509_get0_notBefore(x), NULL) > 0)
		cfg_err_at(c, cfg_where(c, "providers.https.cert_file"),
			   "providers.https.cert_file: %s is not valid yet (check the clock, or the certificate's "
			   "notBefore); the control plane would refuse it", cert_path);
	if (config_cert_days(cert_path, &days, until, sizeof(until)) == 0 && sym_X509_cmp_time(sym_X509_get0_notAfter(x), NULL) < 0)
		cfg_err_at(c, cfg_where(c, "providers.https.cert_file"),
			   "providers.https.cert_file: %s expired on %s; the control plane would refuse it: install a "
			   "renewed certificate and its key, then systemctl reload memgrantd", cert_path, until);
	k = load_key(key_path, why, sizeof(why));
	if (!k) {
		cfg_err_at(c, cfg_where(c, key_key),
			   "%s: %s holds no private key memgrantd can use (%s; a key encrypted with a passphrase "
			   "cannot be used); the agent could not connect to the control plane", key_key, key_path, why);
	} else if (sym_X509_check_private_key(x, k) != 1) {
		sym_ERR_clear_error();
		cfg_err_at(c, cfg_where(c, key_key),
			   "%s: %s is not the key of the certificate %s (another pair): the TLS handshake would fail; "
			   "install the key made with this certificate (compare openssl x509 -noout -pubkey -in %s "
			   "with openssl pkey -pubout -in %s)",
			   key_key, key_path, cert_path, cert_path, key_path);
	}
	sym_EVP_PKEY_free(k);
	sym_X509_free(x);
}

/*
 * The CA file: certificates only.  A private key there (a key file given
 * by mistake) would verify nothing, and copies a secret into a file meant
 * to be public.
 */
static void check_ca(struct ctx *c, const char *path)
{
	char why[256], kwhy[256];
	X509 *x = load_cert(path, why, sizeof(why));
	EVP_PKEY *k = load_key(path, kwhy, sizeof(kwhy));

	sym_ERR_clear_error();
	if (k)
		cfg_err_at(c, cfg_where(c, "providers.https.ca_file"),
			   "providers.https.ca_file: %s holds a private key; ca_file takes the CA certificate(s) that "
			   "signed the control plane's certificate, never a key: set ca_file to that CA's PEM file "
			   "(-----BEGIN CERTIFICATE-----) and keep the key out of it", path);
	else if (!x)
		cfg_err_at(c, cfg_where(c, "providers.https.ca_file"),
			   "providers.https.ca_file: %s is not a PEM certificate (%s); the agent could not verify the "
			   "control plane: set ca_file to the CA's certificate in PEM form", path, why);
	sym_EVP_PKEY_free(k);
	sym_X509_free(x);
}

void cfg_check_credentials(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v)
{
	const struct mg_https_config *h = &cfg->providers.https;
	static const char conn[] = "the agent could not connect to the control plane";
	bool cert_ok = false, key_ok = false;

	if (h->enabled) {
		if (h->ca_file && !cfg_bad(c, "providers.https.ca_file") &&
		    check_one(c, v, "providers.https.ca_file", h->ca_file, conn))
			check_ca(c, h->ca_file);
		if (h->cert_file && !cfg_bad(c, "providers.https.cert_file"))
			cert_ok = check_one(c, v, "providers.https.cert_file", h->cert_file, conn);
		if (h->key_file && !cfg_bad(c, "providers.https.key_file"))
			key_ok = check_one(c, v, "providers.https.key_file", h->key_file, conn);
		if (h->token_file && !cfg_bad(c, "providers.https.token_file"))
			check_one(c, v, "providers.https.token_file", h->token_file, conn);
		/* read here as root: whether the agent gets them is said above */
		if (cert_ok && (key_ok || !h->key_file))
			check_pair(c, h->cert_file, h->key_file ? "providers.https.key_file" : "providers.https.cert_file",
				   h->key_file ? h->key_file : h->cert_file);
	}
	for (size_t i = 0; i < cfg->n_hooks; i++) {
		char key[64];

		snprintf(key, sizeof(key), "hooks[%zu].secret_file", i);
		if (cfg->hooks[i].secret_file && !cfg_bad(c, key))
			check_one(c, v, key, cfg->hooks[i].secret_file, "the webhook could not be signed");
	}
}
