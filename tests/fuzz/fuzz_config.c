/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for config_load_buffer() (config/config.h).  The input
 * is YAML, optionally followed by a NUL byte and one "section.key=value"
 * override.  Whatever the bytes: no crash, no leak, no libyaml assertion,
 * and the contract holds: 0 with a config and no messages, or a negative
 * errno with no config and at least one non-empty message that starts with
 * the document's name.  Built by tests/fuzz/build.sh; make check
 * replays its seeds (tests/fuzz_corpus.sh).
 * Sources: config/keys.c config/convert.c config/load.c config/validate.c config/check.c config/check_agent.c config/check_creds.c config/check_sim.c hotplug/privsep/cred_channel.c lib/credstore.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

#define NAME "fuzz.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(data, '\0', size);
	size_t yaml_len = nul ? (size_t)(nul - text) : size;
	char *override = NULL;
	const char *overrides[2] = { NULL, NULL };
	struct config_diag diag = { 0 };
	struct mg_config *c = NULL;
	int r;

	if (nul) {
		size_t n = size - yaml_len - 1;
		override = malloc(n + 1);
		if (!override)
			return 0;
		memcpy(override, nul + 1, n);
		override[n] = '\0';
		overrides[0] = override;
	}
	r = config_load_buffer(NAME, text, yaml_len, nul ? overrides : NULL, &c, &diag);
	if (r == 0) {
		if (!c || diag.n != 0)
			abort();
	} else {
		if (r > 0 || c || diag.n == 0)
			abort();
		for (size_t i = 0; i < diag.n; i++)
			if (!diag.msgs[i] || strncmp(diag.msgs[i], NAME, strlen(NAME)) != 0)
				abort(); /* every message says where */
	}
	config_free(c);
	config_diag_clear(&diag);
	free(override);
	return 0;
}
