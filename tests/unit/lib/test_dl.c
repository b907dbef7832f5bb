/* SPDX-License-Identifier: MIT */
/*
 * Libraries loaded when first needed (lib/dl_table.h, lib/curl_dl.h,
 * lib/crypto_dl.h, lib/ssl_dl.h): a missing library or function is a clear error naming
 * it; the loaded tables call the real functions.  And systemd's
 * notification protocol without libsystemd (lib/sdnotify.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/crypto_dl.h"
#include "lib/curl_dl.h"
#include "lib/dl_table.h"
#include "lib/sdnotify.h"
#include "lib/ssl_dl.h"

static void test_missing_library(void **state)
{
	static const char *const names[] = { "strlen" };
	void *fns[1] = { NULL };
	char why[256] = "";

	(void)state;
	assert_int_equal(dl_table_open("libmemgrant-no-such.so.9", names, fns, 1, why, sizeof(why)), -ELIBACC);
	assert_non_null(strstr(why, "cannot load libmemgrant-no-such.so.9"));
	assert_null(fns[0]);
}

static void test_missing_function(void **state)
{
	static const char *const names[] = { "strlen", "memgrant_no_such_function" };
	void *fns[2] = { NULL, NULL };
	char why[256] = "";

	(void)state;
	assert_int_equal(dl_table_open("libc.so.6", names, fns, 2, why, sizeof(why)), -ELIBACC);
	assert_non_null(strstr(why, "libc.so.6 has no memgrant_no_such_function"));
}

static void test_found(void **state)
{
	static const char *const names[] = { "strlen" };
	void *fns[1] = { NULL };
	size_t (*len)(const char *);
	char why[256] = "";

	(void)state;
	assert_int_equal(dl_table_open("libc.so.6", names, fns, 1, why, sizeof(why)), 0);
	len = (size_t (*)(const char *))fns[0];
	assert_int_equal(len("memgrant"), 8);
}

/* the macros route curl_* and the OpenSSL names through the loaded tables */
static void test_curl_and_crypto_tables(void **state)
{
	static const char key[] = "key", msg[] = "The quick brown fox jumps over the lazy dog";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char why[300] = "", *esc, hex[65];

	(void)state;
	assert_int_equal(curl_dl_load(why, sizeof(why)), 0);
	esc = sym_curl_easy_escape(NULL, "a b/c", 0);
	assert_string_equal(esc, "a%20b%2Fc");
	sym_curl_free(esc);
	assert_int_equal(crypto_dl_load(why, sizeof(why)), 0);
	assert_non_null(sym_HMAC(sym_EVP_sha256(), key, 3, (const unsigned char *)msg, strlen(msg), md, &mdlen));
	assert_int_equal(mdlen, 32);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	/* RFC 4231-style known answer (Wikipedia's HMAC_SHA256 example) */
	assert_string_equal(hex, "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
}

/* libssl's table, and the OpenSSL list the HTTPS provider keeps its CA
 * certificates in (providers/https_ca.c) through libcrypto's */
static void test_ssl_table_and_stack(void **state)
{
	char why[300] = "", item[] = "x";
	OPENSSL_STACK *sk;

	(void)state;
	assert_int_equal(ssl_dl_load(why, sizeof(why)), 0);
	assert_non_null(sym_SSL_CTX_set_cert_verify_callback);
	assert_int_equal(crypto_dl_load(why, sizeof(why)), 0);
	sk = sym_OPENSSL_sk_new_null();
	assert_non_null(sk);
	assert_true(sym_OPENSSL_sk_push(sk, item) > 0);
	assert_int_equal(sym_OPENSSL_sk_num(sk), 1);
	assert_ptr_equal(sym_OPENSSL_sk_value(sk, 0), item);
	sym_OPENSSL_sk_free(sk);
}

static void test_notify(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[] = "/tmp/memgrant-sdn.XXXXXX", buf[64];
	int fd;
	ssize_t n;

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sdn_notify("READY=1"), 0); /* not under systemd: nothing to do */
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(sdn_notify("READY=1"), -EINVAL);
	assert_non_null(mkdtemp(dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	assert_int_equal(sdn_notify("STATUS=idle"), 1);
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	assert_int_equal(n, 11);
	buf[n] = '\0';
	assert_string_equal(buf, "STATUS=idle");
	close(fd);
	unlink(sa.sun_path);
	rmdir(dir);
	assert_true(sdn_notify("READY=1") < 0); /* nobody listens any more */
	unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog(void **state)
{
	uint64_t usec = 0;
	char pid[32];

	(void)state;
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	assert_int_equal(sdn_watchdog_usec(&usec), 0);
	setenv("WATCHDOG_USEC", "400000", 1);
	assert_int_equal(sdn_watchdog_usec(&usec), 1);
	assert_int_equal(usec, 400000);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(sdn_watchdog_usec(&usec), 1);
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1); /* our parent's */
	assert_int_equal(sdn_watchdog_usec(&usec), 0);
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "4s", 1);
	assert_int_equal(sdn_watchdog_usec(&usec), -EINVAL);
	unsetenv("WATCHDOG_USEC");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_library),
		cmocka_unit_test(test_missing_function),
		cmocka_unit_test(test_found),
		cmocka_unit_test(test_curl_and_crypto_tables),
		cmocka_unit_test(test_ssl_table_and_stack),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_watchdog),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
