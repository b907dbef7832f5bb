/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for memgrant-host serve's parser of guest lines
 * (providers/host/serve/serve_gmsg.c): whatever a guest writes on its channel,
 * gmsg_parse() does not crash or leak, gives a known kind, and a bad line
 * carries a reason of printable text; ids it hands out are valid ids and
 * integers stay within 2^53.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/host/serve/serve_gmsg.c lib/wire/message.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "providers/host/serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gmsg m;
	char why[256];

	gmsg_parse((const char *)data, size, &m, why, sizeof(why));
	if ((unsigned)m.kind > GMSG_OTHER)
		abort();
	if (m.kind == GMSG_BAD && why[0] == '\0')
		abort();
	if (m.id[0] && !msg_id_valid(m.id))
		abort();
	if (m.seq > MSG_GENERATION_MAX || m.generation > MSG_GENERATION_MAX || m.bytes > MSG_GENERATION_MAX)
		abort();
	if ((m.kind == GMSG_REQUEST || m.kind == GMSG_OFFER) && m.bytes == 0)
		abort();
	if (m.have_mem_available && m.mem_available > m.mem_total)
		abort();
	return 0;
}
