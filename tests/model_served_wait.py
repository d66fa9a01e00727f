#!/usr/bin/env python3
"""Exhaustive check of the served-wait protocol (src/core/served.c) on x86-TSO.

Threads:
  S   the sleeper: `waits` served waits in a row on one channel, each
      cancellable, the first optionally with a timer (its own T).
  V   a server: `serves` attempts to take S's waiter (a send to S's recv).
  C   kr_mp_cancel(S), once, at any moment.
  Ti  the timer of S's first wait (if armed), which fires at any moment
      between its arming and S's cancelling it.

Memory: x86-TSO.  Each thread has a FIFO store buffer; a load reads its own
buffer first, then memory; a locked RMW (CAS, xchg, spin-lock acquire)
drains the thread's buffer and acts on memory.  membarrier() is modelled
as what it guarantees: every other thread's buffer is drained at one point
between its entry and its return.  The S and V sides use plain stores and
loads with no fence (a compiler barrier only).  Unlock is a plain store.

What S's block and resume do to memory: the switch away and the scheduler
take locked instructions, and a microprocess runs elsewhere only after
on_cpu's release: S's buffer is drained when it is resumed.  A ready is
a locked instruction of the readier (the slot's exchange): its buffer is
drained first.

Checked in every final state (all threads done or blocked for good):
  - S is not blocked for good (nothing lost: a cancel or timeout that
    found the wait in time ends it; a server that took it readies it);
  - every ready of S is consumed by exactly one block of S (no double run,
    none left over);
  - a wait S reports served was kept by a V, and one it reports left
    (ECANCELED/ETIMEDOUT) was not: each kept hand-over is seen by S once;
  - a cancel that did not end a wait is still pending at the end (one
    cancel ends one wait or stays pending);
  - S under the lock never finds its waiter MOVED or DONE after an
    interrupt, and never resumes with neither DONE nor INTR.
  - no write of V or T lands on S's record after S ended (its last wait
    over: the record could then be another life's);
  - no wait ends with ETIMEDOUT but the one with a timer, and the cancel
    ends at most one wait (a cancel whose bit a wait took ends no other).
Then each of MUTATIONS, a rule of the protocol broken, must be found.

Not modelled: the one VP, where T runs on the VP in sequence with the
sleepers and the servers that are microprocesses, and fences against a
server on another thread, which fences too (a symmetric Dekker pair); and
record reuse, which the generation checks of WS_THIRD's CASes close.

Usage: model_served_wait.py (all, then the mutations); MUTATE=name runs
the configurations with one mutation.
"""
import os
import sys

MUT = os.environ.get("MUTATE", "")

WAITING, MOVED, DONE, LEFT, NONE = 'W', 'M', 'D', 'L', '-'


def run(waits, serves, cancel, timer):
    # shared memory
    mem0 = dict(lock=0, q=0, wst=NONE, wgen=0, served=0,
                cancel=0, busy=0, intr=0, status=0, tstate='off')
    # thread-local state: pc and registers
    threads = {}
    threads['S'] = dict(pc='begin', k=0, g=0, res=(), sb=(), blocked=0, r=0)
    threads['V'] = dict(pc='lock', n=0, sb=(), kept=(), r=0)
    if cancel:
        threads['C'] = dict(pc='rmw', sb=(), x=0, g=0)
    if timer:
        threads['T'] = dict(pc='idle', sb=(), x=0, g=0)

    def freeze(mem, th, ready, consumed, ended_writes):
        return (tuple(sorted(mem.items())),
                tuple((k, tuple(sorted((a, b) for a, b in v.items())))
                      for k, v in sorted(th.items())), ready, consumed, ended_writes)

    def load(mem, t, var):
        for v, val in reversed(t['sb']):
            if v == var:
                return val
        return mem[var]

    def drain(mem, t):
        for v, val in t['sb']:
            mem[v] = val
        t['sb'] = ()

    errors = []
    seen = set()
    finals = 0

    def copy(mem, th):
        return dict(mem), {k: dict(v) for k, v in th.items()}

    stack = [(mem0, threads, 0, 0, 0)]
    while stack:
        mem, th, ready, consumed, badw = stack.pop()
        key = freeze(mem, th, ready, consumed, badw)
        if key in seen:
            continue
        seen.add(key)
        moves = []

        # store-buffer flushes (one store at a time, FIFO)
        for name, t in th.items():
            if t['sb']:
                m, h = copy(mem, th)
                tt = h[name]
                v, val = tt['sb'][0]
                m[v] = val
                tt['sb'] = tt['sb'][1:]
                # a V/T write to S's record after S ended
                b = badw
                if name != 'S' and v == 'served' and h['S']['pc'] == 'end':
                    b = 1
                moves.append((m, h, ready, consumed, b))

        def step(name, fn):
            m, h = copy(mem, th)
            r = fn(m, h, h[name])
            if r is None:
                return
            rd, cs, b = r
            moves.append((m, h, rd, cs, b))

        S = th['S']

        # ---------------- S ----------------
        def s_step(m, h, t):
            rd, cs, b = ready, consumed, badw
            pc = t['pc']
            if pc == 'begin':          # lock the channel (spin: RMW)
                if m['lock'] or load(m, t, 'lock'):
                    return None
                drain(m, t)
                m['lock'] = 'S'
                # the next odd generation: a served wait leaves its own odd
                t['g'] = (load(m, t, 'wgen') + 2) | 1
                t['sb'] += (('wgen', t['g']),)
                t['pc'] = 'chk'
            elif pc == 'chk':          # compiler barrier; load wstate's cancel bit
                if load(m, t, 'cancel'):
                    t['pc'] = 'abort_unlock'
                else:
                    t['pc'] = 'arm' if (timer and t['k'] == 0) else 'push'
            elif pc == 'arm':
                m['tstate'] = 'armed'
                h['T']['pc'] = 'wait_fire'
                t['pc'] = 'push'
            elif pc == 'push':
                t['sb'] += (('q', 1), ('wst', WAITING))
                t['pc'] = 'unlock'
            elif pc == 'unlock':
                t['sb'] += (('lock', 0),)
                t['pc'] = 'block'
            elif pc == 'block':        # wait for a ready
                if ready <= consumed:
                    return None
                cs += 1
                drain(m, t)
                t['pc'] = 'tcancel' if (timer and t['k'] == 0) else 'resumed'
            elif pc == 'tcancel':      # kr__timer_cancel: wait for FIRED if firing
                if m['tstate'] == 'firing':
                    return None
                m['tstate'] = 'off'
                t['pc'] = 'resumed'
            elif pc == 'resumed':
                if load(m, t, 'wst') == DONE:
                    t['res'] += ('served',)
                    t['pc'] = 'next'
                else:
                    if not load(m, t, 'intr'):
                        errors.append('resumed with neither DONE nor INTR')
                    t['pc'] = 'leave_lock'
            elif pc == 'leave_lock':
                if m['lock'] or load(m, t, 'lock'):
                    return None
                drain(m, t)
                m['lock'] = 'S'
                w = load(m, t, 'wst')
                if w == WAITING:
                    t['sb'] += (('q', 0),)
                elif w != LEFT:
                    errors.append('interrupted S found its waiter %s' % w)
                if MUT == 'intr-before-even':
                    t['sb'] += (('lock', 0), ('served', 0))
                else:
                    t['sb'] += (('lock', 0), ('wgen', t['g'] + 1), ('served', 0))
                t['pc'] = 'end_cas'
            elif pc == 'end_cas':      # CAS: wait out BUSY, clear INTR, take CANCEL
                drain(m, t)
                if m['busy']:
                    return None
                if not m['intr']:
                    errors.append('interrupted end without INTR')
                m['intr'] = 0
                c = m['cancel']
                m['cancel'] = 0
                t['res'] += ('canceled' if c else 'timedout',)
                t['pc'] = 'late_even' if MUT == 'intr-before-even' else 'next'
            elif pc == 'late_even':
                t['sb'] += (('wgen', t['g'] + 1),)
                t['pc'] = 'next'
            elif pc == 'abort_unlock':
                t['sb'] += (('lock', 0), ('wgen', t['g'] + 1), ('served', 0))
                t['pc'] = 'abort_cas'
            elif pc == 'abort_cas':    # CAS: wait out BUSY; INTR: block once first
                drain(m, t)
                if m['busy']:
                    return None
                if m['intr'] and MUT != 'abort-no-block':
                    t['pc'] = 'abort_block'
                    return rd, cs, b
                m['cancel'] = 0
                t['res'] += ('canceled',)
                t['pc'] = 'next'
            elif pc == 'abort_block':
                if ready <= consumed:
                    return None
                cs += 1
                drain(m, t)
                t['pc'] = 'abort_clear'
            elif pc == 'abort_clear':
                if m['busy']:
                    return None
                m['intr'] = 0
                m['cancel'] = 0
                t['res'] += ('canceled',)
                t['pc'] = 'next'
            elif pc == 'next':
                t['k'] += 1
                t['pc'] = 'begin' if t['k'] < waits else 'end'
                if t['pc'] == 'end':
                    drain(m, t)
            else:
                return None
            return rd, cs, b

        step('S', s_step)

        # ---------------- V ----------------
        def v_step(m, h, t):
            rd, cs, b = ready, consumed, badw
            pc = t['pc']
            Sdone = h['S']['pc'] == 'end'
            if pc == 'lock':
                if t['n'] >= serves:
                    t['pc'] = 'end'
                    return rd, cs, b
                if m['lock'] or load(m, t, 'lock'):
                    return None
                drain(m, t)
                m['lock'] = 'V'
                if not load(m, t, 'q'):
                    t['sb'] += (('lock', 0),)
                    t['n'] += 1
                    t['pc'] = 'lock'
                    return rd, cs, b
                t['sb'] += (('q', 0), ('wst', MOVED), ('served', h['S']['g']))
                t['pc'] = 'claim'
            elif pc == 'claim':        # compiler barrier; load wstate
                if load(m, t, 'busy') and MUT != 'v-ignores-busy':
                    return None        # waits while BUSY
                if load(m, t, 'intr'):
                    t['sb'] += (('wst', LEFT), ('lock', 0))
                    t['n'] += 1
                    t['pc'] = 'lock'
                else:
                    t['sb'] += (('lock', 0), ('status', 1), ('wst', DONE))
                    t['pc'] = 'ready'
            elif pc == 'ready':
                drain(m, t)
                if Sdone:
                    b = 1
                t['kept'] += (h['S']['k'],)
                rd += 1
                t['n'] += 1
                t['pc'] = 'lock'
            else:
                return None
            return rd, cs, b

        step('V', v_step)

        # ---------------- T: cancel and timer ----------------
        def t_body(m, h, t, is_cancel):
            rd, cs, b = ready, consumed, badw
            pc = t['pc']
            Sdone = h['S']['pc'] == 'end'
            if pc == 'rmw':            # the permit's RMW, with the cancel bit
                drain(m, t)
                m['cancel'] = 1
                t['pc'] = 'busy'
            elif pc == 'wait_fire':    # armed: may fire now
                if m['tstate'] != 'armed':
                    t['pc'] = 'end'
                    return rd, cs, b
                m['tstate'] = 'firing'
                t['pc'] = 'busy'
            elif pc == 'busy':         # CAS: wait out BUSY, set it
                drain(m, t)
                if m['busy']:
                    return None
                m['busy'] = 1      # a CAS that checks the life's generation
                t['pc'] = 'mb'
            elif pc == 'mb':           # membarrier: every other buffer drained
                if MUT != 'no-membarrier':
                    for o in h.values():
                        drain(m, o)
                t['pc'] = 'decide'
            elif pc == 'decide':
                g = m['wgen']
                back = (g % 2 == 0 or (m['served'] == g and MUT != 't-ignores-served') or m['intr'])
                # a cancel whose bit a wait has taken meanwhile has ended that
                # wait: it ends no other
                if is_cancel and not m['cancel'] and MUT != 'cancel-ignores-bit':
                    back = True
                if not is_cancel and g != h['S']['g']:
                    back = True
                if back:
                    m['busy'] = 0
                    t['pc'] = 'fired' if not is_cancel else 'end'
                else:
                    if Sdone:
                        b = 1
                    m['busy'] = 0
                    m['intr'] = 1
                    t['pc'] = 'ready'
            elif pc == 'ready':
                drain(m, t)
                rd += 1
                t['pc'] = 'fired' if not is_cancel else 'end'
            elif pc == 'fired':
                m['tstate'] = 'fired'
                t['pc'] = 'end'
            else:
                return None
            return rd, cs, b

        if 'C' in th:
            step('C', lambda m, h, t: t_body(m, h, t, True))
        if 'T' in th:
            step('T', lambda m, h, t: t_body(m, h, t, False))

        if moves:
            stack.extend(moves)
            continue

        # final state
        finals += 1
        S = th['S']
        bad = []
        # S may wait for good for a send that never comes, but not with a
        # cancel pending, a timer that fired, or a ready it did not take
        if S['pc'] != 'end' and (mem['cancel'] or mem['tstate'] != 'off' or
                                 S['pc'] not in ('block',)):
            bad.append('S stuck at %s (wait %d)' % (S['pc'], S['k']))
        if ready != consumed:
            bad.append('readies %d, consumed %d' % (ready, consumed))
        kept = th['V']['kept']
        for i, r in enumerate(S['res']):
            if (r == 'served') != (i in kept):
                bad.append('wait %d: %s, kept by V: %s' % (i, r, i in kept))
        for i, r in enumerate(S['res']):
            if r == 'timedout' and not (timer and i == 0):
                bad.append('wait %d timed out without a timer' % i)
        if cancel and S['pc'] == 'end':
            used = S['res'].count('canceled')
            if used + mem['cancel'] != 1:
                bad.append('cancel used %d times, pending %d' % (used, mem['cancel']))
        if badw:
            bad.append('V or T wrote S\'s record after S ended')
        if bad:
            errors.append('; '.join(bad) + '  | mem %s res %s' % (mem, S['res']))
            if len(errors) > 5:
                break
    return finals, len(seen), errors


CONFIGS = [
    (1, 1, True, False), (1, 1, False, True), (1, 1, True, True),
    (2, 2, True, False), (2, 2, True, True), (1, 2, True, True),
    (2, 1, True, True), (3, 2, True, False),
]

# Each breaks one rule of the protocol; the check must find every one.
MUTATIONS = ['no-membarrier', 'abort-no-block', 'intr-before-even', 'v-ignores-busy',
             't-ignores-served', 'cancel-ignores-bit']


def check(verbose):
    ok = True
    for waits, serves, cancel, timer in CONFIGS:
        finals, states, errors = run(waits, serves, cancel, timer)
        if verbose:
            print('waits=%d serves=%d cancel=%d timer=%d: %d states, %d final, %s' %
                  (waits, serves, cancel, timer, states, finals,
                   'ok' if not errors else 'FAIL'))
            for e in errors[:5]:
                print('   ', e)
        ok = ok and not errors
    return ok


def main():
    global MUT
    if MUT:
        return 0 if check(True) else 1
    ok = check(True)
    for m in MUTATIONS:
        MUT = m
        found = not check(False)
        print('mutation %-20s %s' % (m, 'found' if found else 'NOT FOUND'))
        ok = ok and found
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
