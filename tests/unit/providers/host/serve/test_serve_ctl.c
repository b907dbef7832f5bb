/* SPDX-License-Identifier: MIT */
/* memgrant-host serve's two-phase state machine (providers/host/serve/serve_ctl.c)
 * against the fake hypervisor and guests of fakehv.h, which inject what was
 * measured: coalesced size events, a partial unplug, plugged memory that is
 * never onlined, a DIMM detach refused and one never answered, a guest that
 * dies mid-revocation, two guests competing for too little, a restart in
 * the middle of a grow, a hostile guest, an offer below the floor, a state
 * folder that takes no write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "fakehv.h"

#define M FH_MIB

struct t {
	char dir[64];
	struct fh f;
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/mg-serve-ctl.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	fh_init(&t->f, t->dir);
	t->f.quiet = getenv("VERBOSE") == NULL;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	fh_done(&t->f);
	rm_rf(t->dir);
	free(t);
	return 0;
}

/* Grow on a request: plugged first, granted only once the agent applied it. */
static void test_grow_two_phase_coalesced(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 2000);
	assert_true(d->queries_seen >= 1);
	fh_advice(d, "request", 768 * M); /* a deficit of 768M, above the 512M step: one grow of it all */
	fh_run(f, 600);
	v = fh_view(f, "vm");
	/* plugging: the device moves, nothing counts as granted yet */
	assert_int_equal(v.phase, PH_PLUGGING);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->requested, 768 * M);
	assert_int_equal(d->grants_seen, 0);
	fh_run(f, 1500); /* the coalesced event with the final size came: grant sent, once */
	assert_int_equal(d->grants_seen, 1);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_GRANTING);
	assert_int_equal(v.granted, 0); /* plugged is not usable */
	fh_run(f, 1500);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 768 * M);
	assert_int_equal(d->online_granted, 768 * M);
	assert_int_equal(v.requests_capped, 0);
	assert_int_equal(v.grows, 1);
	assert_int_equal(f->plugs, 1);
	assert_true(d->acks_seen >= 3); /* the request and the grant's reports */
	/* more requests within the cooldown are one grow later, not many */
	fh_advice(d, "request", 512 * M);
	fh_advice(d, "request", 512 * M);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 8000);
	v = fh_view(f, "vm");
	assert_int_equal(v.granted, 1280 * M);
	assert_int_equal(f->plugs, 2);
	assert_false(d->panicked);
}

/* Offer -> revoke -> offline -> unplug; an offer below the floor is refused by the service. */
static void test_shrink_and_floor(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	f->cfg.defaults.shrink_step = 1ull << 30;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	/* a hog: 1.4G used of 1.5G: the offer of everything must not go through */
	d->used_mem = 1400 * M;
	fh_run(f, 6000); /* past the shrink cooldown, a fresh agent status */
	fh_advice(d, "offer", 512 * M);
	fh_run(f, 2000);
	v = fh_view(f, "vm");
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->revokes_seen, 0);
	assert_true(v.refused_floor >= 1);
	assert_true(fh_events_named(f, "vm", "shrink.refused") >= 1);
	assert_false(d->panicked);
	/* the hog exits: the offer is taken; revoked, then unplugged */
	d->used_mem = 300 * M;
	fh_run(f, 1500);
	fh_advice(d, "offer", 512 * M);
	fh_run(f, 1000);
	v = fh_view(f, "vm");
	assert_int_equal(d->revokes_seen, 1);
	fh_run(f, 4000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->requested, 0);
	assert_int_equal(d->plugged, 0);
	assert_int_equal(v.shrinks, 1);
	assert_false(d->panicked);
}

/* The device reports the plug before the guest has added the memory block
 * (virtio-mem, seen under TCG): the grant is rejected, sent again with a new
 * generation, and applied; nothing is taken back. */
static void test_grant_before_blocks(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	d->blocks_delay_ms = 2500;
	d->online_ms = 0;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	fh_run(f, 6000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 256 * M);
	assert_int_equal(d->online_granted, 256 * M);
	assert_true(fh_events_named(f, "vm", "grant.retry") >= 1);
	assert_int_equal(fh_events_named(f, "vm", "grant.applied"), 1);
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 0);
	assert_int_equal(d->plugged, 256 * M);
	assert_true(d->grants_seen >= 2);
}

/* The same with a DIMM: attached at once, its blocks later (ACPI): the grant of its range is retried. */
static void test_dimm_grant_before_blocks(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_DIMM);
	struct dom_view v;

	d->blocks_delay_ms = 2500;
	d->online_ms = 0;
	f->cfg.defaults.dimm_size = 256 * M;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	fh_run(f, 6000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 256 * M);
	assert_int_equal(d->n_dimms, 1);
	assert_true(fh_events_named(f, "vm", "grant.retry") >= 1);
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 0);
}

/* A shrink the floor refuses for as long as the hog stays (above max, no
 * offer) is said once per shrink cooldown, not at every tick. */
static void test_standing_refusal_once(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);

	f->cfg.defaults.shrink_step = 512 * M;
	f->cfg.defaults.shrink_cooldown = 30000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	d->used_mem = 1400 * M;
	f->cfg.defaults.max = 0; /* the operator lowers max while the guest needs it all */
	fh_run(f, 60000);
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	assert_int_equal(d->revokes_seen, 0);
	/* the cooldown after the grow, then once more 30 s later: 600 ticks, 2 refusals */
	assert_int_equal(fh_events_named(f, "vm", "shrink.refused"), 2);
	assert_false(d->panicked);
}

/* Plugged, never onlined: reported and taken back. */
static void test_plugged_not_onlined(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	d->never_online = true;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	fh_run(f, 4000);
	assert_int_equal(d->plugged, 256 * M);
	assert_int_equal(fh_view(f, "vm").granted, 0);
	fh_run(f, 10000); /* the online deadline */
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 1);
	v = fh_view(f, "vm");
	assert_int_equal(v.not_onlined, 1);
	assert_int_equal(d->revokes_seen, 1); /* revoke of that grant, then the unplug */
	fh_run(f, 4000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->requested, 0);
	assert_int_equal(d->plugged, 0);
}

/* A file where the state folder was: every write under it fails. */
static void state_dir_unwritable(struct t *t)
{
	char away[80];
	int fd;

	snprintf(away, sizeof(away), "%s.away", t->dir);
	assert_int_equal(rename(t->dir, away), 0);
	fd = open(t->dir, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
}

/* The state folder back as it was. */
static void state_dir_back(struct t *t)
{
	char away[80];

	snprintf(away, sizeof(away), "%s.away", t->dir);
	assert_int_equal(unlink(t->dir), 0);
	assert_int_equal(rename(away, t->dir), 0);
}

/* A grant not applied in time while the state folder takes no write: its
 * revocation has no generation yet, so it is tried again after a backoff,
 * not at every tick, and nothing is counted or said until it goes. */
static void test_take_back_state_unwritable(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	d->never_online = true;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	fh_run(f, 4000);
	assert_int_equal(fh_view(f, "vm").phase, PH_GRANTING);
	state_dir_unwritable(t);
	fh_run(f, 10000); /* past the online deadline */
	v = fh_view(f, "vm");
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 0);
	assert_int_equal(v.not_onlined, 0);
	assert_int_equal(v.phase, PH_GRANTING);
	state_dir_back(t);
	fh_run(f, 10000);
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 1);
	v = fh_view(f, "vm");
	assert_int_equal(v.not_onlined, 1);
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->plugged, 0);
}

/* A grant's final report that comes while the state folder takes no write
 * is acknowledged only once the journal holds what it meant: till then the
 * agent keeps it, and a serve that stopped meanwhile would get it again. */
static void test_report_acked_once_journaled(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	unsigned acks;

	d->online_ms = 3000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	for (int i = 0; i < 200 && !(fh_view(f, "vm").phase == PH_GRANTING && d->grants_seen); i++)
		fh_step(f);
	assert_int_equal(fh_view(f, "vm").phase, PH_GRANTING);
	acks = d->acks_seen;
	state_dir_unwritable(t);
	fh_run(f, 5000); /* the guest applies it and reports */
	assert_int_equal(d->online_granted, 256 * M);
	assert_int_equal(fh_events_named(f, "vm", "grant.applied"), 1);
	assert_int_equal(d->acks_seen, acks); /* not on disk: not acknowledged */
	fh_run(f, 10000);
	assert_int_equal(d->acks_seen, acks); /* tried again, still not */
	state_dir_back(t);
	fh_run(f, 6000); /* the next try, at most 5 s later */
	assert_int_equal(d->acks_seen, acks + 1);
	assert_int_equal(fh_view(f, "vm").granted, 256 * M);
	assert_int_equal(fh_view(f, "vm").phase, PH_IDLE);
}

/* The same when the device kept part of an unplug: its grant back waits for
 * a state folder that takes the generation, and says nothing meanwhile. */
static void test_partial_unplug_state_unwritable(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	d->unplug_floor = 384 * M;
	fh_run(f, 5000);
	fh_advice(d, "offer", 512 * M);
	fh_run(f, 3000);
	assert_int_equal(fh_view(f, "vm").phase, PH_UNPLUGGING);
	state_dir_unwritable(t);
	fh_run(f, 12000); /* past the unplug deadline */
	assert_int_equal(fh_events_named(f, "vm", "unplug.partial"), 0);
	assert_int_equal(fh_view(f, "vm").phase, PH_UNPLUGGING);
	state_dir_back(t);
	fh_run(f, 15000);
	assert_int_equal(fh_events_named(f, "vm", "unplug.partial"), 1);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 384 * M);
	assert_int_equal(d->online_granted, 384 * M);
}

/* The device keeps part of what was unplugged: granted back, never left plugged and unusable. */
static void test_partial_unplug(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	d->unplug_floor = 384 * M; /* the device stops there (e.g. unmovable pages in its blocks) */
	fh_run(f, 5000);
	fh_advice(d, "offer", 512 * M);
	fh_run(f, 3000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_UNPLUGGING);
	assert_int_equal(v.granted, 0); /* all 512M offered revoked in one step ... */
	assert_int_equal(d->plugged, 384 * M); /* ... the device gave only 128M */
	fh_run(f, 12000); /* the unplug deadline: the 128M it kept are granted back */
	assert_int_equal(fh_events_named(f, "vm", "unplug.partial"), 1);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 384 * M);
	assert_int_equal(d->plugged, 384 * M);
	assert_int_equal(d->requested, 384 * M);
	assert_int_equal(d->online_granted, 384 * M);
	assert_false(d->panicked);
}

/* A guest that dies mid-revocation: nothing is unplugged under it; it stays granted; backoff. */
static void test_guest_dies_mid_revocation(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;
	bool found;
	struct dom_record rec;
	char why[256];

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	fh_run(f, 5000);
	fh_advice(d, "offer", 256 * M);
	fh_run(f, 150); /* the revoke is sent ... */
	assert_int_equal(d->revokes_seen, 1);
	d->dead = true; /* ... and the guest's agent dies */
	d->n_ops = 0;
	ctl_channel_down(f->ctl, "vm", f->now);
	d->connected = false;
	fh_run(f, 25000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->requested, 512 * M); /* nothing unplugged under a guest that may still use it */
	assert_int_equal(v.failed_revokes, 1);
	assert_true(v.backoff_ms >= 10000);
	assert_false(d->panicked);
	/* the domain goes away: its journal with it */
	assert_int_equal(serve_journal_load(t->dir, "vm", &rec, &found, why, sizeof(why)), 0);
	assert_true(found);
	ctl_domain_gone(f->ctl, "vm", f->now);
	assert_int_equal(serve_journal_load(t->dir, "vm", &rec, &found, why, sizeof(why)), 0);
	assert_false(found);
	assert_int_equal(ctl_domains(f->ctl), 0);
}

/* Two guests ask at once for more than the host has: fair shares, never above the budget. */
static void test_two_guests_too_little(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *a = fh_add(f, "a", HV_VIRTIO_MEM), *b = fh_add(f, "b", HV_VIRTIO_MEM);

	f->host_free = 512 * M;
	f->cfg.host_reserve = 0;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(a, "request", 512 * M);
	fh_advice(b, "request", 512 * M);
	fh_run(f, 6000);
	assert_int_equal(fh_view(f, "a").granted, 256 * M);
	assert_int_equal(fh_view(f, "b").granted, 256 * M);
	assert_true(fh_events_named(f, NULL, "budget.short") >= 2);
}

/* Killed after the plug, before the agent applied: the restart replays the grant, counts it once. */
static void test_restart_mid_grow(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	d->online_ms = 3000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 2500);
	assert_int_equal(d->grants_seen, 1);
	assert_int_equal(fh_view(f, "vm").phase, PH_GRANTING);
	/* kill -9: the controller's memory is gone, the journal and the device stay */
	ctl_free(f->ctl);
	f->ctl = NULL;
	d->out_len = 0; /* what the agent wrote meanwhile is lost with the old stream */
	f->now += 2000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 6000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->online_granted, 512 * M);
	assert_true(d->replays_seen >= 1); /* the same id and generation, answered from the record */
	assert_int_equal(f->plugs, 1);
	assert_int_equal(d->plugged, 512 * M);
	assert_int_equal(d->requested, 512 * M);
}

/* kill -9 of the service while the device moves; the device gets to its
 * target while no service runs (its event goes to the dead one); restart */
static void restart_after_device_done(struct fh *f, struct fh_dom *d)
{
	ctl_free(f->ctl);
	f->ctl = NULL;
	d->out_len = 0;
	d->plugged = d->requested;
	d->last_event_size = d->plugged;
	f->now += 2000;
	assert_int_equal(fh_start(f), 0);
}

/* kill -9 while plugging; the device got there while the service was down,
 * so no size event comes: the restarted service grants from the device's
 * size at once (not at the plug deadline), and only once. */
static void test_restart_mid_plug(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	for (int i = 0; i < 30 && fh_view(f, "vm").phase != PH_PLUGGING; i++)
		fh_run(f, 100);
	assert_int_equal(fh_view(f, "vm").phase, PH_PLUGGING);
	restart_after_device_done(f, d);
	fh_run(f, 4000); /* far below the plug deadline */
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->online_granted, 512 * M);
	assert_int_equal(f->plugs, 1);
	assert_int_equal(d->plugged, 512 * M);
}

/* The same for an unplug: the service is killed after it asked the device
 * to shrink, the device gets there before the restart (its event went to
 * the dead service); the restarted one finishes it at once: "unplugged",
 * the shrink counted, idle, long before the unplug deadline. */
static void test_restart_mid_unplug(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	fh_run(f, 6000); /* past the shrink cooldown */
	fh_advice(d, "offer", 512 * M);
	for (int i = 0; i < 50 && fh_view(f, "vm").phase != PH_UNPLUGGING; i++)
		fh_run(f, 100);
	assert_int_equal(fh_view(f, "vm").phase, PH_UNPLUGGING);
	restart_after_device_done(f, d);
	fh_run(f, 1000); /* far below the unplug deadline */
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->plugged, 0);
	assert_int_equal(v.shrinks, 1);
	assert_true(fh_events_named(f, "vm", "unplugged") >= 1);
}

/* kill -9 of the service: its memory is gone, the journal and the device stay */
static void fh_kill_restart(struct fh *f, struct fh_dom *d, int64_t down_ms)
{
	ctl_free(f->ctl);
	f->ctl = NULL;
	d->out_len = 0; /* what the agent wrote meanwhile is lost with the old stream */
	f->now += down_ms;
	assert_int_equal(fh_start(f), 0);
}

/* kill -9 between a grow's plug and its grant (the device has the memory,
 * the grant is not sent yet), restart: granted once, plugged == granted, and
 * the grow's cooldowns hold across the restart: an offer right after it
 * waits for the shrink cooldown counted from the grow, not from the restart. */
static void test_kill_between_plug_and_grant(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;
	int64_t grew_at;

	f->cfg.defaults.shrink_step = 512 * M;
	f->cfg.defaults.shrink_cooldown = 30000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	for (int i = 0; i < 30 && fh_view(f, "vm").phase != PH_PLUGGING; i++)
		fh_run(f, 100);
	assert_int_equal(fh_view(f, "vm").phase, PH_PLUGGING);
	grew_at = f->now;
	assert_int_equal(d->grants_seen, 0);
	d->plugged = d->requested; /* plugged; its size event goes to the dead service */
	d->last_event_size = d->plugged;
	fh_kill_restart(f, d, 2000);
	fh_run(f, 4000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->online_granted, 512 * M);
	assert_int_equal(d->plugged, v.granted);
	assert_int_equal(d->requested, v.granted);
	assert_int_equal(f->plugs, 1);
	assert_int_equal(v.plugs, 1); /* the counters came back from the journal */
	assert_int_equal(v.grows, 1);
	assert_int_equal(v.requests, 1);
	/* the guest offers it all back at once: the shrink cooldown of the grow still runs */
	fh_advice(d, "offer", 512 * M);
	while (f->now < grew_at + 29000) {
		fh_run(f, 1000);
		assert_int_equal(d->revokes_seen, 0);
		if (!fh_view(f, "vm").offer)
			fh_advice(d, "offer", 512 * M);
	}
	fh_run(f, 8000);
	v = fh_view(f, "vm");
	assert_int_equal(d->revokes_seen, 1);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->plugged, 0);
	assert_int_equal(v.shrinks, 1);
	assert_false(d->panicked);
}

/* kill -9 between a revocation and its unplug (the agent offlined the
 * blocks, the device has not shrunk yet), restart: the unplug finishes,
 * plugged == granted, the counters and the shrink cooldown survive. */
static void test_kill_between_revoke_and_unplug(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	struct dom_view v;
	int64_t shrank_at;

	f->cfg.defaults.shrink_step = 512 * M;
	f->cfg.defaults.shrink_cooldown = 20000;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 1024 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 1024 * M);
	fh_run(f, 20000); /* past the grow's shrink cooldown */
	fh_advice(d, "offer", 512 * M);
	for (int i = 0; i < 50 && fh_view(f, "vm").phase != PH_UNPLUGGING; i++)
		fh_run(f, 100);
	assert_int_equal(fh_view(f, "vm").phase, PH_UNPLUGGING);
	shrank_at = f->now;
	assert_int_equal(d->revokes_seen, 1);
	fh_kill_restart(f, d, 2000);
	fh_run(f, 4000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 512 * M);
	assert_int_equal(d->online_granted, 512 * M);
	assert_int_equal(d->plugged, v.granted);
	assert_int_equal(d->requested, v.granted);
	assert_int_equal(d->revokes_seen, 1);
	assert_int_equal(v.grows, 1);
	assert_int_equal(v.shrinks, 1);
	assert_int_equal(v.offers, 1);
	/* another offer at once: the shrink cooldown still counts from the first shrink */
	fh_advice(d, "offer", 512 * M);
	while (f->now < shrank_at + 19000) {
		fh_run(f, 1000);
		assert_int_equal(d->revokes_seen, 1);
		if (!fh_view(f, "vm").offer)
			fh_advice(d, "offer", 512 * M);
	}
	fh_run(f, 8000);
	v = fh_view(f, "vm");
	assert_int_equal(d->revokes_seen, 2);
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->plugged, 0);
	assert_int_equal(v.shrinks, 2);
	assert_false(d->panicked);
}

/* The guest asks again while its grow is in flight: that was the same need, one grow. */
static void test_request_during_grow(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);

	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	for (int i = 0; i < 30 && fh_view(f, "vm").phase != PH_PLUGGING; i++)
		fh_run(f, 100);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 12000); /* past the grow cooldown */
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	assert_int_equal(f->plugs, 1);
}

/* After a restart with memory plugged that nobody granted: unplugged. */
static void test_reconcile_plugged_ungranted(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);

	d->plugged = d->requested = 384 * M; /* e.g. the journal was lost, or the guest rebooted */
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 5000);
	assert_int_equal(fh_view(f, "vm").granted, 0);
	assert_int_equal(d->requested, 0);
	assert_int_equal(d->plugged, 0);
	assert_true(fh_events_named(f, "vm", "reconciled") >= 1);
}

/* A flooder and a normal guest: the normal one is served as fast as alone, the flooder gets its cap. */
static void test_hostile_guest(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *good = fh_add(f, "good", HV_VIRTIO_MEM), *bad = fh_add(f, "bad", HV_VIRTIO_MEM);
	struct dom_view vg, vb;
	int64_t t0;

	f->cfg.defaults.max = 1ull << 30;
	good->used_mem = 1200 * M; /* it uses what it gets: no slack to take back */
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	/* 20000 lines: garbage, lies, huge requests, reports for operations nobody sent */
	for (int i = 0; i < 5000; i++) {
		static const char *junk[] = { "{\"type\":\"request\",\"bytes\":-1}", "\x01\x02\xff garbage",
					      "{\"type\":\"status\",\"id\":\"mgs-999\",\"generation\":999,\"state\":\"applied\",\"applied_bytes\":1099511627776}",
					      "[1,2,3]" };
		for (int k = 0; k < 4; k++) {
			size_t n = strlen(junk[k]);
			bad->out = realloc(bad->out, bad->out_len + n + 1);
			memcpy(bad->out + bad->out_len, junk[k], n);
			bad->out[bad->out_len + n] = '\n';
			bad->out_len += n + 1;
		}
		if (i % 10 == 0)
			fh_advice(bad, "request", 1ull << 40);
	}
	t0 = f->now;
	fh_advice(good, "request", 256 * M);
	while (fh_view(f, "good").granted < 256 * M && f->now - t0 < 20000)
		fh_step(f);
	vg = fh_view(f, "good");
	assert_int_equal(vg.granted, 256 * M);
	/* alone, a grow takes about 2.2 s with these figures (plug 0.3 s, event, online 1 s) */
	assert_true(f->now - t0 <= 3500);
	fh_run(f, 60000);
	vb = fh_view(f, "bad");
	assert_true(vb.granted <= f->cfg.defaults.max); /* the cap, not what it asked */
	/* its lines are read at its budget (50 a second, burst 200, garbage costs 4), no faster */
	assert_true(vb.lines_bad >= 100);
	assert_true(vb.lines <= 200 + 50 * 65);
	assert_true(vb.lines_dropped >= 10); /* its channel was paused, over and over */
	assert_true(bad->out_len > 0);       /* the rest waits in its own queue */
	assert_true(vb.not_onlined <= 3);    /* backoff: 10 s, 20 s, 40 s ... */
	assert_int_equal(fh_view(f, "good").granted, 256 * M);
	assert_int_equal(fh_view(f, "good").lines_bad, 0);
}

/* A standby guest that answers its grant long after every deadline and never
 * answers a revocation (the take-back of that grant): what it may still apply
 * counts against max until its report comes, so max is never granted twice. */
static void test_late_grant_counts_against_max(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_STANDBY);
	uint64_t most = 0;

	f->cfg.defaults.max = 512 * M;
	d->plugged = 2048 * M; /* standby: always there, nothing to plug */
	d->online_ms = 45000;  /* past the online deadline, the take-back's deadline and one more */
	d->deaf_revokes = true;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	for (int i = 0; i < 60; i++) {
		fh_advice(d, "request", 1ull << 40);
		for (int k = 0; k < 20; k++) {
			uint64_t g = fh_view(f, "vm").granted;
			most = g > most ? g : most;
			fh_step(f);
		}
	}
	assert_int_equal(fh_events_named(f, "vm", "plugged_not_usable"), 1);
	assert_true(d->revokes_seen >= 1);
	assert_int_equal(d->grants_seen, 1); /* no second grant while the first may still apply */
	assert_int_equal(most, 512 * M);      /* the late report counted, once */
	assert_int_equal(d->online_granted, 512 * M);
}

/* The same agent never applies it and restarts: its fresh status (granted 0)
 * ends the wait, and its next request is granted. */
static void test_late_grant_cleared_by_fresh_status(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_STANDBY);

	f->cfg.defaults.max = 512 * M;
	d->plugged = 2048 * M;
	d->never_online = true;
	d->deaf_revokes = true;
	d->used_mem = 4096 * M; /* it uses what it gets: no slack to take back */
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 256 * M);
	fh_run(f, 60000);
	assert_int_equal(d->grants_seen, 1);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 10000);
	assert_int_equal(d->grants_seen, 2); /* 256M may still come: 256M more is all max allows */
	assert_int_equal(fh_events_named(f, "vm", "decision"), 2);
	/* the agent restarts, having applied nothing, and answers again */
	ctl_channel_down(f->ctl, "vm", f->now);
	d->never_online = false;
	d->deaf_revokes = false;
	d->n_ops = 0;
	fh_run(f, 1000);
	ctl_channel_up(f->ctl, "vm", f->now);
	fh_run(f, 5000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 30000); /* past the grow backoff of two grants not applied: 10 s, then 20 s */
	assert_int_equal(fh_view(f, "vm").granted, 512 * M);
	assert_int_equal(d->online_granted, 512 * M);
}

/* DIMMs: one DIMM per grow granted by its range; a refused detach is granted back; a hung one waits. */
static void test_dimm_refused_and_hung_detach(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_DIMM);
	struct dom_view v;

	f->cfg.defaults.dimm_size = 256 * M;
	f->cfg.defaults.slack_after = 3600000; /* shrinks on offers only, to keep the timeline readable */
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 3000);
	v = fh_view(f, "vm");
	assert_int_equal(v.granted, 256 * M); /* one DIMM */
	assert_int_equal(d->n_dimms, 1);
	fh_run(f, 5000);
	d->detach_fail = true; /* the guest refuses the detach */
	fh_advice(d, "offer", 256 * M);
	fh_run(f, 1500);
	assert_int_equal(d->revokes_seen, 1);
	assert_int_equal(fh_view(f, "vm").phase, PH_UNPLUGGING);
	fh_run(f, 6000); /* DEVICE_REMOVAL_FAILED after 5 s */
	fh_run(f, 3000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 256 * M); /* granted back: plugged and usable */
	assert_int_equal(d->n_dimms, 1);
	assert_int_equal(d->online_granted, 256 * M);
	/* a detach that never reports: busy is waited on, then granted back */
	d->detach_fail = false;
	d->detach_hang = true;
	fh_run(f, 30000);
	fh_advice(d, "offer", 256 * M);
	fh_run(f, 50000);
	v = fh_view(f, "vm");
	assert_int_equal(v.phase, PH_IDLE);
	assert_int_equal(v.granted, 256 * M);
	assert_int_equal(d->online_granted, 256 * M);
	/* and a detach that works */
	d->detach_hang = false;
	d->detach_alias[0] = '\0';
	fh_run(f, 40000);
	fh_advice(d, "offer", 256 * M);
	fh_run(f, 10000);
	v = fh_view(f, "vm");
	assert_int_equal(v.granted, 0);
	assert_int_equal(d->n_dimms, 0);
}

/* Dry run: decisions, no plug, no grant. */
static void test_dry_run(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);

	f->cfg.dry_run = true;
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 1000);
	fh_advice(d, "request", 512 * M);
	fh_run(f, 5000);
	assert_int_equal(fh_events_named(f, "vm", "decision"), 1);
	assert_int_equal(f->plugs, 0);
	assert_int_equal(d->grants_seen, 0);
	assert_int_equal(d->requested, 0);
}

static char *status_text(struct fh *f)
{
	json_t *st = serve_status_json(f->ctl, &f->cfg);
	char *text = st ? json_dumps(st, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;

	json_decref(st);
	assert_non_null(text);
	return text;
}

/* The status file is a view of state, written when it changes, rendered at
 * most once per SERVE_VIEW_MS or at once after an event: routine traffic (the agent's answers to the
 * queries) leaves it as it is (the lines read are in the metrics); a
 * guest's figures that change make one write; a file that cannot be
 * written is tried again at the next rendering. */
static void test_status_view_written_on_change(void **state)
{
	struct t *t = *state;
	struct fh *f = &t->f;
	struct fh_dom *d = fh_add(f, "vm", HV_VIRTIO_MEM);
	char path[128], *text, *again, *metrics, *metrics_again;
	struct serve_view v = { .path = path };

	snprintf(path, sizeof(path), "%s/serve-status.json", t->dir);
	assert_int_equal(fh_start(f), 0);
	fh_run(f, 3000);
	assert_true(serve_view_due(&v, f->now));
	assert_false(serve_view_due(&v, f->now + SERVE_VIEW_MS - 1));
	assert_true(serve_view_due(&v, f->now + SERVE_VIEW_MS));
	assert_false(serve_view_due(&v, f->now + SERVE_VIEW_MS + 1));
	serve_view_soon(&v); /* an event: its state shows at the tick's end */
	assert_true(serve_view_due(&v, f->now + SERVE_VIEW_MS + 1));
	assert_false(serve_view_due(&v, f->now + SERVE_VIEW_MS + 2));
	text = status_text(f);
	metrics = serve_metrics_text(f->ctl);
	assert_int_equal(serve_view_put(&v, text), 1);
	fh_run(f, 5000); /* five queries answered */
	again = status_text(f);
	metrics_again = serve_metrics_text(f->ctl);
	assert_string_equal(again, v.last);
	assert_string_not_equal(metrics_again, metrics); /* memgrant_host_guest_lines_total */
	assert_null(strstr(again, "\"lines\""));
	assert_int_equal(serve_view_put(&v, again), 0);
	assert_int_equal(v.writes, 1);

	d->used_mem += 64 * M;
	fh_run(f, 2000);
	assert_int_equal(serve_view_put(&v, status_text(f)), 1);
	assert_int_equal(v.writes, 2);
	{
		_cleanup_free_ char *file = NULL;
		size_t len;

		assert_int_equal(file_read_all(path, 1u << 20, &file, &len), 0);
		assert_string_equal(file, v.last);
	}
	/* unwritable: the last text stays what was written, tried again */
	snprintf(path, sizeof(path), "%s/no-such-folder/serve-status.json", t->dir);
	d->used_mem += 64 * M;
	fh_run(f, 2000);
	assert_true(serve_view_put(&v, status_text(f)) < 0);
	assert_int_equal(v.writes, 2);
	snprintf(path, sizeof(path), "%s/serve-status.json", t->dir);
	assert_int_equal(serve_view_put(&v, status_text(f)), 1);
	serve_view_done(&v);
	free(metrics);
	free(metrics_again);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grow_two_phase_coalesced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_view_written_on_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shrink_and_floor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plugged_not_onlined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_back_state_unwritable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_unplug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_unplug_state_unwritable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_report_acked_once_journaled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_dies_mid_revocation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_guests_too_little, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_mid_grow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_plugged_ungranted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_guest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dimm_refused_and_hung_detach, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_before_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dimm_grant_before_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_standing_refusal_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_mid_plug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_mid_unplug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_between_plug_and_grant, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_between_revoke_and_unplug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_during_grow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_grant_counts_against_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_grant_cleared_by_fresh_status, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
