/* SPDX-License-Identifier: MIT */
/* The memory-pressure monitor (providers/pressure.h), driven through stand-in
 * files under a temporary root (never the real /proc): PSI parsing, the
 * trigger line, one request per spike (cool-down), an offer once idle, and
 * the MemAvailable fallback when there is no PSI file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "providers/pressure.h"
#include "lib/fileio.h"
#include "lib/util.h"

#define PSI_HIGH "some avg10=45.50 avg60=12.00 avg300=3.00 total=123456\nfull avg10=10.00 avg60=2.00 avg300=0.50 total=4567\n"
#define PSI_MID "some avg10=5.00 avg60=4.00 avg300=3.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=4567\n"
#define PSI_IDLE "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=4567\n"

struct fixture {
	char tmp[64];
	char psi[160];
	char meminfo[160];
	char vmstat[160];
	int64_t last_deficit; /* the last request's deficit_bytes (-1: none) */
	struct mg_log log;
	pthread_mutex_t lock;
	unsigned requests, offers, highs, lows;
	uint64_t last_bytes;
	char last_reason[256];
	uint64_t revocable;
	uint64_t now_ms;      /* the test's clock */
	pthread_cond_t cond;  /* signalled at every emit */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char d[128];

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-pressure-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	snprintf(d, sizeof(d), "%s/proc/pressure", f->tmp);
	mkdir_p(d, 0755);
	snprintf(f->psi, sizeof(f->psi), "%s/memory", d);
	snprintf(f->meminfo, sizeof(f->meminfo), "%s/proc/meminfo", f->tmp);
	snprintf(f->vmstat, sizeof(f->vmstat), "%s/proc/vmstat", f->tmp);
	log_init(&f->log, "test_pressure", LOG_DEBUG);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_rf(f->tmp);
	pthread_mutex_destroy(&f->lock);
	free(f);
	return 0;
}

static void put(const char *path, const char *text)
{
	assert_int_equal(file_write_atomic(path, text, strlen(text), 0644), 0);
}

static void emit(void *ud, const char *event, json_t *msg, json_t *detail)
{
	struct fixture *f = ud;
	const char *type = json_string_value(json_object_get(msg, "type"));

	pthread_mutex_lock(&f->lock);
	if (streq(event, "pressure.high"))
		f->highs++;
	if (streq(event, "pressure.low"))
		f->lows++;
	if (type && streq(type, "request"))
		f->requests++;
	if (type && streq(type, "offer"))
		f->offers++;
	f->last_bytes = (uint64_t)json_integer_value(json_object_get(msg, "bytes"));
	if (type && streq(type, "request"))
		f->last_deficit = json_object_get(msg, "deficit_bytes")
					  ? (int64_t)json_integer_value(json_object_get(msg, "deficit_bytes")) : -1;
	snprintf(f->last_reason, sizeof(f->last_reason), "%s", json_string_value(json_object_get(msg, "reason")));
	assert_non_null(json_string_value(json_object_get(msg, "id")));
	assert_string_equal(json_string_value(json_object_get(msg, "agent")), "guest-7");
	assert_non_null(detail);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static uint64_t revocable(void *ud)
{
	struct fixture *f = ud;
	uint64_t v;

	pthread_mutex_lock(&f->lock);
	v = f->revocable;
	pthread_mutex_unlock(&f->lock);
	return v;
}

static void counts(struct fixture *f, unsigned *req, unsigned *off)
{
	pthread_mutex_lock(&f->lock);
	*req = f->requests;
	*off = f->offers;
	assert_int_equal(f->highs, f->requests);
	assert_int_equal(f->lows, f->offers);
	pthread_mutex_unlock(&f->lock);
}

static struct mg_pressure_config config(uint64_t cooldown_ms)
{
	return (struct mg_pressure_config){
		.enabled = true,
		.request_above = { .set = true, .kind = MG_PSI_SOME, .window_s = 10, .above = true,
				   .threshold_centi = 2000 },
		.release_below = { .set = true, .kind = MG_PSI_SOME, .window_s = 10, .above = false,
				   .threshold_centi = 100 },
		.step = 1ull << 30,
		.cooldown_ms = cooldown_ms,
	};
}

static void test_parse(void **state)
{
	unsigned v = 0;

	(void)state;
	assert_int_equal(pressure_parse_psi(PSI_HIGH, MG_PSI_SOME, 10, &v), 0);
	assert_int_equal(v, 4550);
	assert_int_equal(pressure_parse_psi(PSI_HIGH, MG_PSI_SOME, 300, &v), 0);
	assert_int_equal(v, 300);
	assert_int_equal(pressure_parse_psi(PSI_HIGH, MG_PSI_FULL, 60, &v), 0);
	assert_int_equal(v, 200);
	/* old kernels print no "full" line for memory? they do; a file without it is bad */
	assert_int_equal(pressure_parse_psi("some avg10=1.00 avg60=0.00 avg300=0.00 total=1\n", MG_PSI_FULL, 10, &v),
			 -EBADMSG);
	assert_int_equal(pressure_parse_psi("some avg10=x avg60=0.00\n", MG_PSI_SOME, 10, &v), -EBADMSG);
	assert_int_equal(pressure_parse_psi("", MG_PSI_SOME, 10, &v), -EBADMSG);
	assert_int_equal(pressure_parse_psi("something avg10=1.00\n", MG_PSI_SOME, 10, &v), -EBADMSG);
}

static void test_trigger_line(void **state)
{
	struct mg_psi_trigger t = { .set = true, .kind = MG_PSI_SOME, .window_s = 10, .threshold_centi = 2000 };
	char line[64];
	uint64_t n = 0;

	(void)state;
	/* the average's ratio over a short window: a burst without swap stalls briefly */
	assert_int_equal(pressure_trigger_line(&t, PRESSURE_TRIGGER_WINDOW_US, line, sizeof(line)), 0);
	assert_string_equal(line, "some 200000 1000000");
	t = (struct mg_psi_trigger){ .set = true, .kind = MG_PSI_FULL, .window_s = 300, .threshold_centi = 50 };
	assert_int_equal(pressure_trigger_line(&t, PRESSURE_TRIGGER_WINDOW_UNPRIV_US, line, sizeof(line)), 0);
	assert_string_equal(line, "full 10000 2000000");
	t.threshold_centi = 0;
	assert_int_equal(pressure_trigger_line(&t, PRESSURE_TRIGGER_WINDOW_US, line, sizeof(line)), 0);
	assert_string_equal(line, "full 1 1000000");
	/* /proc/vmstat's OOM kill count */
	assert_int_equal(pressure_parse_oom_kills("nr_free_pages 1\noom_kill 17\nnr_foo 3\n", &n), 0);
	assert_int_equal(n, 17);
	assert_int_equal(pressure_parse_oom_kills("nr_free_pages 1\n", &n), -ENOENT);
	assert_int_equal(pressure_parse_oom_kills("oom_kill x\n", &n), -EBADMSG);
	assert_int_equal(pressure_parse_oom_kills("oom_kill 99999999999999999999999\n", &n), -EBADMSG);
	assert_int_equal(pressure_parse_oom_kills("oom_kill_other 3\n", &n), -ENOENT);
}

/* The test's clock (pressure_params.clock_ms): time moves only when a test
 * says so, so the cool-down and the idle periods are exact, not windows. */
static uint64_t clock_of(void *ud)
{
	struct fixture *f = ud;
	uint64_t v;

	pthread_mutex_lock(&f->lock);
	v = f->now_ms;
	pthread_mutex_unlock(&f->lock);
	return v;
}

/* One reading at NOW (the test's clock). */
static void read_at(struct fixture *f, struct pressure *p, uint64_t now)
{
	int last_err = 0;

	pthread_mutex_lock(&f->lock);
	f->now_ms = now;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(pressure_read_once(p, &last_err), 0);
}

/* A stand-in file is no procfs: the monitor reads it at the interval.  A
 * spike that lasts many readings is one request; idle is an offer only once
 * it lasted release_below's window (10 s) and the request is answered or its
 * cool-down over; then one offer (at most a step without MemAvailable); a new
 * spike is a new request.  Readings at the test's clock, 40 ms apart,
 * cool-down 20 s: the offer comes at exactly the first reading 20 s after
 * the request. */
static void test_spike_is_one_request(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(20000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 40,
				      .emit = emit, .revocable = revocable, .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;
	uint64_t t = 10000, asked;

	f->revocable = 3ull << 30;
	put(f->psi, PSI_MID);
	/* plenty available: the spike is PSI's alone (and must not be forgotten as a need gone) */
	put(f->meminfo, "MemTotal:        4194304 kB\nMemFree:          3000000 kB\nMemAvailable:    3145728 kB\n");
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	assert_int_equal(pressure_source(p), PRESSURE_PSI);
	for (int i = 0; i < 5; i++, t += 40)
		read_at(f, p, t);
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	assert_int_equal(off, 0);

	put(f->psi, PSI_HIGH); /* 15 readings above the threshold: one spike */
	asked = t;
	for (int i = 0; i < 15; i++, t += 40)
		read_at(f, p, t);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	assert_int_equal(f->last_bytes, 1ull << 30);
	assert_non_null(strstr(f->last_reason, "some avg10 45.50% is above 20.00%"));

	put(f->psi, PSI_IDLE); /* idle for the window, but the request is within its cool-down */
	for (; t < asked + 20000; t += 40)
		read_at(f, p, t);
	read_at(f, p, asked + 19999);
	counts(f, &req, &off);
	assert_int_equal(off, 0);
	read_at(f, p, asked + 20000); /* the cool-down is over: one offer of the surplus */
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	assert_int_equal(off, 1);
	assert_int_equal(f->last_bytes, 3ull << 30); /* 3G available, no reserve, in 1G steps */
	t = asked + 20000;
	for (int i = 0; i < 10; i++) /* still idle, within the offer's cool-down: no second offer */
		read_at(f, p, t += 40);
	counts(f, &req, &off);
	assert_int_equal(off, 1);

	/* a spike while the offer is not answered: the revocation's own page migration */
	put(f->psi, PSI_HIGH);
	read_at(f, p, t += 40);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	/* the offer taken (MemTotal shrank), the grow latency (5 s) past: a spike is a request */
	put(f->meminfo, "MemTotal:        1048576 kB\nMemFree:            10000 kB\nMemAvailable:    1048576 kB\n");
	read_at(f, p, t += 40);
	read_at(f, p, t += 5000);
	counts(f, &req, &off);
	assert_int_equal(req, 2);
	assert_int_equal(off, 1);
	pressure_stop(p);
}

/* Nothing granted: idle memory is nobody's to offer.  Once something is
 * revocable, the next reading past the idle window offers it (at most a step). */
static void test_no_offer_without_grants(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(0);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 30,
				      .emit = emit, .revocable = revocable, .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;
	uint64_t t = 10000;

	f->revocable = 0;
	put(f->psi, PSI_IDLE);
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	for (int i = 0; i < 10; i++, t += 30)
		read_at(f, p, t);
	counts(f, &req, &off);
	assert_int_equal(off, 0);
	pthread_mutex_lock(&f->lock);
	f->revocable = 128ull << 20; /* read at the monitor's next reading */
	pthread_mutex_unlock(&f->lock);
	read_at(f, p, 10000 + 10000); /* idle since the first reading, for release_below's 10 s */
	counts(f, &req, &off);
	assert_int_equal(off, 1);
	assert_int_equal(f->last_bytes, 128ull << 20);
	assert_int_equal(req, 0);
	pressure_stop(p);
}

/* No PSI file: MemAvailable below the reserve is pressure. */
static void test_meminfo_fallback(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(60000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 30,
				      .reserve = 256ull << 20, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;

	put(f->meminfo, "MemTotal:        4194304 kB\nMemFree:          1000000 kB\nMemAvailable:    1048576 kB\n");
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	assert_int_equal(pressure_source(p), PRESSURE_MEMINFO);
	read_at(f, p, 10000);
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	put(f->meminfo, "MemTotal:        4194304 kB\nMemFree:            10000 kB\nMemAvailable:     131072 kB\n");
	read_at(f, p, 10030);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	assert_non_null(strstr(f->last_reason, "MemAvailable 128M is below the reserve 256M"));
	pressure_stop(p);
}

/* meminfo with MemTotal and MemAvailable in MiB */
static void put_mem(struct fixture *f, unsigned total_mib, unsigned avail_mib)
{
	char text[160];

	snprintf(text, sizeof(text), "MemTotal: %8u kB\nMemFree: %8u kB\nMemAvailable: %8u kB\n", total_mib * 1024,
		 avail_mib * 1024, avail_mib * 1024);
	put(f->meminfo, text);
}

static void put_oom(struct fixture *f, unsigned kills)
{
	char text[96];

	snprintf(text, sizeof(text), "nr_free_pages 1000\noom_kill %u\nnr_other 5\n", kills);
	put(f->vmstat, text);
}

#define MIB (1ull << 20)

/* Without swap anonymous memory goes from "enough" to the OOM killer with
 * almost no stall: the monitor asks before MemAvailable reaches the reserve,
 * as soon as the allocation rate would use up what is left above it within
 * a plug's latency, and asks for the deficit (reserve + two headrooms, less
 * what is available), not a fixed step. Readings come sooner as the rate
 * rises. */
static void test_rate_asks_ahead_for_the_deficit(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(60000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 10000,
				      .reserve = 256 * MIB, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;

	cfg.step = 128 * MIB;
	cfg.plug_latency_ms = 5000;
	put_mem(f, 4096, 1000);
	put_oom(f, 0);
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	assert_int_equal(pressure_source(p), PRESSURE_MEMINFO);
	read_at(f, p, 10000);
	assert_int_equal(pressure_next_ms(p), 10000); /* nothing moves: the longest interval */
	put_mem(f, 4096, 900);
	read_at(f, p, 11000); /* 100M/s: headroom 500M; 900M > 256M + 500M */
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	/* a quarter of the time to use up 644M at 100M/s */
	assert_in_range(pressure_next_ms(p), 1600, 1620);
	put_mem(f, 4096, 800);
	read_at(f, p, 12000);
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	put_mem(f, 4096, 700);
	read_at(f, p, 13000); /* 700M < 756M: ask, still 444M above the reserve */
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	assert_int_equal(f->last_deficit, (int64_t)(556 * MIB)); /* 256M + 2 x 500M - 700M */
	assert_int_equal(f->last_bytes, 640 * MIB);               /* rounded up to the 128M step */
	assert_non_null(strstr(f->last_reason, "falls 100M/s"));
	/* not answered yet, the same need (640M): no second request within the cooldown */
	put_mem(f, 4096, 620);
	read_at(f, p, 14000);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	/* the need grew past what was asked (the host may have refused it): asked again */
	put_mem(f, 4096, 500);
	read_at(f, p, 14500); /* 240M/s: 256M + 2 x 1200M - 500M */
	counts(f, &req, &off);
	assert_int_equal(req, 2);
	assert_int_equal(f->last_bytes, 2176 * MIB);
	/* the grant came (MemTotal grew) 1.5 s after that request and the guest is
	 * still short: it asks again at once, with the headroom of the measured 1.5 s */
	put_mem(f, 4096 + 256, 700);
	read_at(f, p, 16000);
	put_mem(f, 4096 + 256, 400);
	read_at(f, p, 17000); /* 300M/s x 1.5 s = 450M of headroom */
	counts(f, &req, &off);
	assert_int_equal(req, 3);
	assert_int_equal(off, 0);
	assert_int_equal(f->last_deficit, (int64_t)(756 * MIB)); /* 256M + 2 x 450M - 400M */
	pressure_stop(p);
}

/* The OOM killer ran: the kernel's own evidence is a request at once, even
 * within the cooldown and with MemAvailable back above the reserve (the
 * kill freed memory). */
static void test_oom_kill_asks_at_once(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(600000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 1000,
				      .reserve = 256 * MIB, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;

	cfg.step = 128 * MIB;
	put_mem(f, 4096, 200);
	put_oom(f, 7); /* kills before the agent started are history */
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	read_at(f, p, 10000);
	counts(f, &req, &off);
	assert_int_equal(req, 1); /* below the reserve */
	put_mem(f, 4096, 1500);
	put_oom(f, 9);
	read_at(f, p, 11000);
	counts(f, &req, &off);
	assert_int_equal(req, 2);
	assert_non_null(strstr(f->last_reason, "the OOM killer ran 2 times"));
	/* MemAvailable is back up (the victims freed theirs), but the kill says
	 * nothing was left: the whole reserve is asked, not one step */
	assert_int_equal(f->last_bytes, 256 * MIB);
	read_at(f, p, 12000); /* no new kill, plenty available: quiet */
	counts(f, &req, &off);
	assert_int_equal(req, 2);
	pressure_stop(p);
}

/* After a burst the guest gives back what is idle in one offer, but keeps
 * what the recent fastest allocation would use up within a plug's latency,
 * fading over 20 s with the burst's age; as it fades the rest goes.  An
 * answered offer (MemTotal shrank) lets the next one go within the cooldown. */
static void test_offer_keeps_the_recent_headroom(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(20000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 1000,
				      .reserve = 256 * MIB, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;
	uint64_t t = 10000;

	cfg.step = 128 * MIB;
	cfg.plug_latency_ms = 2000;
	cfg.release_below.window_s = 10;
	f->revocable = 1024 * MIB;
	put_mem(f, 2048, 1700);
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	read_at(f, p, t);
	put_mem(f, 2048, 1500); /* a burst of 200M/s: keep up to 400M, fading over 20 s */
	read_at(f, p, t += 1000);
	put_mem(f, 2048, 1700);
	/* the rate halves at each reading: below a step a minute (not allocating) at 18 s,
	 * then release_below's 10 s */
	while (t < 27000)
		read_at(f, p, t += 1000);
	counts(f, &req, &off);
	assert_int_equal(off, 0);
	read_at(f, p, t += 1000);
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	assert_int_equal(off, 1);
	assert_int_equal(f->last_bytes, 1024 * MIB); /* 1700 - 256 - 60 (400 x 3/20): 1280M, at most 1G */
	put_mem(f, 1024, 676); /* the revocation took it */
	read_at(f, p, t += 1000);
	/* keep fades with the burst's age: 400M x 2 / 20 = 40M; the offer was answered
	 * (MemTotal shrank), so what is left goes at once */
	counts(f, &req, &off);
	assert_int_equal(off, 2);
	assert_int_equal(f->last_bytes, 256 * MIB); /* 676 - 256 - 40 = 380M, in 128M steps */
	assert_int_equal(req, 0);
	pressure_stop(p);
}

/* A request the host did not answer (it may have had nothing) is forgotten
 * once the need is gone: the next shortage asks at once, not a cooldown
 * later. */
static void test_unanswered_request_forgotten(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(600000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 1000,
				      .reserve = 256 * MIB, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;

	cfg.step = 128 * MIB;
	put_mem(f, 4096, 200);
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	read_at(f, p, 10000);
	put_mem(f, 4096, 200);
	read_at(f, p, 11000); /* unanswered, within the cooldown: no repeat */
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	put_mem(f, 4096, 1000); /* the hog went away, MemTotal never grew */
	read_at(f, p, 12000);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	/* a new shortage of the same size (MemTotal moved, so no rate: 128M asked again) */
	put_mem(f, 4000, 200);
	read_at(f, p, 13000);
	counts(f, &req, &off);
	assert_int_equal(req, 2);
	assert_int_equal(f->last_bytes, 128 * MIB);
	pressure_stop(p);
}

/* A revocation isolates its pages before MemTotal drops, so MemAvailable
 * falls fast while nothing allocates: that is not a burst (it was one in
 * the libvirt test, and asked for 1G right after giving it back).  After
 * the grow latency a real allocation counts again. */
static void test_revocation_is_not_a_burst(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(30000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 1000,
				      .reserve = 256 * MIB, .emit = emit, .revocable = revocable,
				      .clock_ms = clock_of, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;
	uint64_t t;

	cfg.step = 128 * MIB;
	cfg.plug_latency_ms = 2000;
	f->revocable = 1024 * MIB;
	put_mem(f, 2048, 1700);
	assert_int_equal(pressure_open(&pp, &f->log, &p), 0);
	for (t = 10000; t <= 20000; t += 1000)
		read_at(f, p, t);
	counts(f, &req, &off);
	assert_int_equal(off, 1);
	pthread_mutex_lock(&f->lock);
	f->revocable = 0; /* all of it offered */
	pthread_mutex_unlock(&f->lock);
	put_mem(f, 2048, 1200); /* the revocation isolates 1G */
	read_at(f, p, 20500);
	put_mem(f, 2048, 700);
	read_at(f, p, 21000);
	put_mem(f, 1024, 676); /* and the blocks go */
	read_at(f, p, 21500);
	counts(f, &req, &off);
	assert_int_equal(req, 0);
	put_mem(f, 1024, 676);
	read_at(f, p, 24000);
	put_mem(f, 1024, 400); /* a real burst, past the grow latency */
	read_at(f, p, 25000);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	pressure_stop(p);
}

/* The thread: it reads at once when it starts (no interval first), so a
 * spike present at start is one request; waited for as an event. */
static void test_thread_reads_at_start(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(60000);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .agent_id = "guest-7", .interval_ms = 3600000,
				      .emit = emit, .revocable = revocable, .userdata = f };
	struct pressure *p = NULL;
	unsigned req, off;
	struct timespec guard;

	put(f->psi, PSI_HIGH);
	assert_int_equal(pressure_start(&pp, &f->log, &p), 0);
	clock_gettime(CLOCK_REALTIME, &guard);
	guard.tv_sec += 60; /* a hang guard, not a speed target */
	pthread_mutex_lock(&f->lock);
	while (f->requests == 0)
		if (pthread_cond_timedwait(&f->cond, &f->lock, &guard) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->lock);
	pressure_stop(p);
	counts(f, &req, &off);
	assert_int_equal(req, 1);
	assert_int_equal(off, 0);
}

static void test_bad_params(void **state)
{
	struct fixture *f = *state;
	struct mg_pressure_config cfg = config(0);
	struct pressure_params pp = { .cfg = &cfg, .root = f->tmp, .emit = NULL };
	struct pressure *p = NULL;

	assert_int_equal(pressure_start(&pp, &f->log, &p), -EINVAL);
	cfg.enabled = false;
	pp.emit = emit;
	assert_int_equal(pressure_start(&pp, &f->log, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_trigger_line),
		cmocka_unit_test_setup_teardown(test_spike_is_one_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_offer_without_grants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meminfo_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rate_asks_ahead_for_the_deficit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_kill_asks_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unanswered_request_forgotten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revocation_is_not_a_burst, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offer_keeps_the_recent_headroom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thread_reads_at_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_params, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
