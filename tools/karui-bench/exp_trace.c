/*
 * karui-bench `trace`: what the scheduling trace (docs/trace.md) costs.
 * Two microprocesses yield to each other on one VP, untraced ("karui")
 * and traced ("karui-trace", written to /dev/null, with a buffer that
 * holds every event), repeat by repeat in turn, so that both see the same
 * moments of a noisy host.  Metrics: ns per switch (a yield is one
 * switch, two events: its caller's stop and the other's run), and the
 * difference per event.  The write-out at kr_fini is not timed.
 */
#include <string.h>

#include "karui.h"
#include "exp.h"

#define XT "trace"
#define EVENT_BYTES 32 /* src/core/trace.c: struct ev */

static long per_mp;

static void *yielder(void *a)
{
	for (long i = 0; i < per_mp; i++)
		kr_mp_yield();
	return a;
}

/* ns per switch of `iters` yields, traced or not; 0 or an errno code */
static int yields(long iters, int traced, double *ns)
{
	kr_config cfg = {.vps = 1};
	if (traced) {
		cfg.trace = "/dev/null";
		cfg.trace_size = (size_t)(iters + 64) * 2 * EVENT_BYTES;
	}
	int err = kr_init(&cfg);
	if (err)
		return err;
	kr_mp *m[2];
	per_mp = iters / 2;
	kr_mp_create(&m[0], NULL, yielder, NULL);
	kr_mp_create(&m[1], NULL, yielder, NULL);
	double t0 = kb_now_ns();
	kr_mp_join(m[0], NULL);
	kr_mp_join(m[1], NULL);
	*ns = (kb_now_ns() - t0) / (per_mp * 2);
	return kr_fini();
}

void kb_trace(const kb_ctx *c)
{
	static const char *const sys[2] = {"karui", "karui-trace"};
	long iters = c->quick ? 50000 : 200000;
	int want[2] = {kb_want(c, XT, sys[0]), kb_want(c, XT, sys[1])};
	double ns[2][16], per_event[16];
	for (int r = -1; r < c->reps; r++) { /* r = -1: the warm-up */
		double v[2] = {0, 0};
		for (int s = 0; s < 2; s++) {
			int err = yields(iters, s, &v[s]);
			if (err) {
				kb_row_none(XT, sys[s], "failed", strerror(err));
				return;
			}
		}
		if (r >= 0) {
			ns[0][r] = v[0];
			ns[1][r] = v[1];
			per_event[r] = (v[1] - v[0]) / 2;
		}
	}
	double karui = want[0] ? kb_row(c, XT, sys[0], "switch", "ns", ns[0], c->reps, 0, -1) : 0;
	if (want[1]) {
		kb_row(c, XT, sys[1], "switch", "ns", ns[1], c->reps, karui, -1);
		kb_row(c, XT, sys[1], "per_event", "ns", per_event, c->reps, 0, -1);
	}
}
