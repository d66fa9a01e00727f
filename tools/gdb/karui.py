# karui's gdb extension: microprocesses as gdb sees threads.
#
#   info microprocesses     every live microprocess: id, state, VP (when it
#                           runs), priority, entry function, where it waits
#   microprocess N bt       its backtrace, from its saved context
#   microprocess N          select it: frame, up, down, print, info locals
#                           work in its frames (frame 0 stays the thread's)
#   microprocess none       back to the threads' own frames
#
# Load it with `source tools/gdb/karui.py`, or install karui: the library's
# auto-load file is this script (docs/gdb.md).  It reads karui's records
# through the library's debug information (the default RelWithDebInfo
# build has it), so it works the same on a live process and on a core
# dump: nothing is written to the inferior.  x86-64 and aarch64: the saved
# frame of each is drawn in src/arch/frame.h (FRAMES below).
#
# Where the records are: karui keeps no list of live microprocesses (it
# would cost the create/exit fast paths).  Every microprocess but the main
# one lives in a stack region of some size class (src/core/stack.c), its
# record at the region's top; each region is in exactly one place: live,
# in a VP's stack cache, free in its class's pool (dirty or clean) or
# being trimmed.  So the live ones are the carved regions that are in no
# pool bitmap and no cache list, and are not a VP's dead record, whose
# record names the region as its own (stack_lo).  The main microprocess's
# record is kr__rt.main.

import gdb

try:
    from gdb.unwinder import Unwinder, register_unwinder
except ImportError:  # gdb without the unwinder API
    Unwinder = None

# src/core/internal.h
WS_NOTIFIED, WS_RUN, WS_SLEEP = 0, 1, 2
WS_CANCEL, WS_THIRD, WS_INTR = 4, 8, 16
JS_NONE, JS_DETACHED, JS_REAPED, JS_DONE = 0, 1, 2, 3
KR_GEN_SHIFT = 48
WS_GEN = 0xffff0000
KR_ADDR_MASK = (1 << KR_GEN_SHIFT) - 1


class Frame:
    """A saved-context frame (src/arch/frame.h), offsets from kr_ctx.sp:
    regs: (gdb's register name, offset) of the callee-saved registers;
    resume: the resume address, which is the caller's pc (and, as `lr`,
    the register the resumption leaves it in); size: the stack pointer
    after resumption is kr_ctx.sp + size; pc, sp: gdb's names for them;
    vregs: (number, offset) of vector registers whose low 8 bytes are
    saved (the calling convention keeps no more of them: the rest reads
    as 0), given to gdb as vN and as the views of it that gdb names
    (VIEWS: qN, dN, sN... are computed registers, which an unwinder must
    give as well)."""

    def __init__(self, regs, resume, size, pc, sp, lr=None, vregs=()):
        self.regs, self.resume, self.size = regs, resume, size
        self.pc, self.sp, self.lr, self.vregs = pc, sp, lr, vregs


FRAMES = {
    # r12 r13 r14 r15 rbx rbp, resume; the MXCSR word below kr_ctx.sp
    # has KR_FRAME_FRESH set in a context that never ran
    "x86-64": Frame((("r12", 0), ("r13", 8), ("r14", 16), ("r15", 24),
                     ("rbx", 32), ("rbp", 40)), 48, 56, "rip", "rsp"),
    # d8-d15 (0-56: the low halves of v8-v15; gdb's d registers are views
    # of those), x19-x28 (64-136), x29 (144), x30 = resume (152), fpcr;
    # a context that never ran resumes at a trampoline
    "aarch64": Frame(tuple(("x%d" % r, 64 + 8 * (r - 19)) for r in range(19, 30)),
                     152, 176, "pc", "sp", "x30",
                     tuple((r, 8 * (r - 8)) for r in range(8, 16))),
}
VIEWS = (("v", 16), ("q", 16), ("d", 8), ("s", 4), ("h", 2), ("b", 1))
KR_FRAME_FRESH = 0x80000000  # x86-64
TRAMPOLINES = ("kr__ctx_trampoline", "kr__ctx_trampoline_counted")  # aarch64


def _arch_name():
    try:
        return gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError):
        try:
            return gdb.selected_frame().architecture().name()
        except gdb.error:
            return "x86-64"


def _frame_layout():
    """(name, Frame) of the inferior's architecture; Frame is None for
    one karui has no context switch for."""
    name = _arch_name()
    for key, f in FRAMES.items():
        if key in name:
            return key, f
    return name, None


def _sym(expr):
    try:
        return gdb.parse_and_eval(expr)
    except gdb.error:
        return None


def _u(v):
    return int(v.cast(gdb.lookup_type("unsigned long")))


def _mp_type():
    return gdb.lookup_type("struct kr_mp")


def _mp_ptr(addr):
    return gdb.Value(addr).cast(_mp_type().pointer())


def _stack_state():
    """stack.c's static state S."""
    for expr in ("'stack.c'::S", "'src/core/stack.c'::S"):
        v = _sym(expr)
        if v is not None:
            return v
    try:
        for s in gdb.lookup_static_symbols("S"):
            v = s.value()
            try:
                v["used"]
                v["caches"]
                return v
            except gdb.error:
                pass
    except AttributeError:
        pass
    return None


def _cached_records(S):
    """Records free in the VPs' stack caches."""
    out = set()
    k = S["caches"]
    seen = 0
    while _u(k) and seen < 4096:
        slots = k["slot"]
        lo, hi = slots.type.range()
        for i in range(lo, hi + 1):
            mp = slots[i]["head"]
            n = 0
            while _u(mp) and n < 1 << 20:
                out.add(_u(mp))
                mp = mp["free_next"]
                n += 1
        k = k["next"]
        seen += 1
    return out


def _workers():
    """(vp id, struct kr_worker *) of every worker."""
    arr = _sym("kr__workers")
    hi = _sym("kr__workers_hi")
    if arr is None or hi is None:
        return []
    out = []
    for i in range(int(hi)):
        w = arr[i]
        if _u(w):
            out.append((i, w))
    return out


def live_records():
    """Addresses of the live microprocesses' records, main's first."""
    recs = []
    main = _sym("kr__rt.main")
    if main is not None and _u(main):
        recs.append(_u(main))
    S = _stack_state()
    if S is None:
        raise gdb.GdbError("karui: no debug information for stack.c's state "
                           "(is libkarui loaded, and built with -g?)")
    free = _cached_records(S)
    for _, w in _workers():
        if _u(w["dead"]):
            free.add(_u(w["dead"]))
    mpsize = _mp_type().sizeof
    nused = int(S["nused"])
    for ci in range(nused):
        c = S["used"][ci]
        if not _u(c):
            continue
        size, stride = int(c["size"]), int(c["stride"])
        nxt, nblk = int(c["next"]), int(c["nblk"])
        chunks = []
        h = c["chunks"]
        while _u(h):
            chunks.append((_u(h["base"]), _u(h["base"]) + int(h["len"])))
            h = h["next"]
        cur = _u(c["cur"])
        head = chunks[0] if chunks else None
        blk = c["blk"]
        for b in range(nblk):
            bk = blk[b]
            base0 = _u(bk["base"])
            if not base0:
                continue
            freemask = int(bk["dirty"]) | int(bk["clean"])
            for i in range(64):
                x = b * 64 + i
                if x >= nxt:
                    break
                if freemask >> i & 1:
                    continue
                base = base0 + i * stride
                lo = base - (stride - size)
                inside = [ch for ch in chunks if ch[0] <= lo and base + size <= ch[1]]
                if not inside:
                    continue
                if head and inside[0] == head and base + size > cur:
                    continue  # not carved yet
                rec = (base + size - mpsize) & ~63
                if rec in free:
                    continue
                try:
                    mp = _mp_ptr(rec).dereference()
                    if _u(mp["stack_lo"]) != base or int(mp["region"]) != x:
                        continue  # being trimmed
                    if not int(mp["wstate"]) & WS_GEN or not _u(mp["ctx"]["sp"]):
                        continue  # never used
                except gdb.MemoryError:
                    continue
                recs.append(rec)
    return recs


def _running_on():
    """record address -> VP id, for the microprocesses VPs run now."""
    out = {}
    for i, w in _workers():
        cur = _u(w["cur"])
        if cur:
            vp = w["vp"]
            vid = i
            try:
                if _u(vp):
                    vid = int(vp["id"])
            except gdb.error:
                pass
            out[cur] = vid
    return out


def _fn_name(addr):
    if not addr:
        return "?"
    try:
        b = gdb.block_for_pc(addr)
        while b is not None and b.function is None:
            b = b.superblock
        if b is not None and b.function is not None:
            return b.function.print_name
    except RuntimeError:
        pass
    try:
        s = gdb.execute("info symbol 0x%x" % addr, to_string=True).split()
        if s and s[0] != "No":
            return s[0]
    except gdb.error:
        pass
    return "0x%x" % addr


def _word(addr, size=8):
    b = gdb.selected_inferior().read_memory(addr, size).tobytes()
    return int.from_bytes(b, "little")


def _fresh(sp):
    """Whether the context saved at sp has never run (src/arch/ctx_init.h)."""
    if not sp:
        return False
    arch, frame = _frame_layout()
    try:
        if arch == "x86-64":
            return bool(_word(sp - 8, 4) & KR_FRAME_FRESH)
        resume = _word(sp + frame.resume)
    except gdb.MemoryError:
        return False
    for name in TRAMPOLINES:
        a = _sym("(unsigned long)&" + name)
        if a is not None and _u(a) == resume:
            return True
    return False


def state_of(rec, running):
    mp = _mp_ptr(rec).dereference()
    join = _u(mp["join"]) & KR_ADDR_MASK
    ws = int(mp["wstate"])
    if rec in running:
        return "running"
    if join in (JS_REAPED, JS_DONE) and not int(mp["is_main"]):
        return "ended"
    if _fresh(_u(mp["ctx"]["sp"])):
        return "new"
    s = ws & 3
    if _u(mp["queued"]):
        return "ready"
    if s == WS_SLEEP:
        return "parked"
    if s == WS_RUN:
        return "runnable" if not int(mp["on_cpu"]) else "switching"
    return "notified"


class Saved:
    """A switched-out microprocess's registers, from its saved frame:
    regs maps gdb's register names to the values its caller sees."""

    def __init__(self, rec, frame):
        mp = _mp_ptr(rec).dereference()
        self.frame = frame
        self.sp = _u(mp["ctx"]["sp"])
        self.regs = {name: _word(self.sp + off) for name, off in frame.regs}
        self.pc = _word(self.sp + frame.resume)
        self.regs[frame.pc] = self.pc
        self.regs[frame.sp] = self.sp + frame.size
        if frame.lr:
            self.regs[frame.lr] = self.pc
        inf = gdb.selected_inferior()
        self.vregs = {}
        for r, off in frame.vregs:
            raw = inf.read_memory(self.sp + off, 8).tobytes() + bytes(8)
            for view, size in VIEWS:
                self.vregs["%s%d" % (view, r)] = raw[:size]


# the microprocess whose saved context stands in for frame 1, or None
_selected = None


if Unwinder is not None:
    class _Unwinder(Unwinder):
        """Frame 0 is the thread's; its caller is the selected
        microprocess's resumption point, with its saved registers."""

        def __init__(self):
            super().__init__("karui-microprocess")

        def __call__(self, pending):
            if _selected is None:
                return None
            try:
                if pending.level() != 0:
                    return None
            except AttributeError:
                return None
            s = _selected
            sp = pending.read_register(s.frame.sp)
            pc = pending.read_register(s.frame.pc)
            # frame 0's id as if it lay below the saved context, so that gdb
            # does not take the step to the microprocess's stack for a
            # corrupt one going backwards
            info = pending.create_unwind_info(_frame_id(gdb.Value(min(int(sp), s.sp - 64)).cast(sp.type), pc))
            t = gdb.lookup_type("unsigned long")
            for name, val in s.regs.items():
                info.add_saved_register(name, gdb.Value(val).cast(t))
            for name, raw in s.vregs.items():
                try:
                    val = gdb.Value(raw, pending.read_register(name).type)
                except (ValueError, gdb.error):
                    continue  # a view this gdb does not have
                info.add_saved_register(name, val)
            return info

    def _frame_id(sp, pc):
        try:
            from gdb.unwinder import FrameId
            return FrameId(sp, pc)
        except ImportError:
            class FrameId:
                def __init__(self, sp, pc):
                    self.sp, self.pc = sp, pc
            return FrameId(sp, pc)

    _the_unwinder = _Unwinder()
    try:
        register_unwinder(None, _the_unwinder, replace=True)
    except TypeError:
        register_unwinder(None, _the_unwinder)


def _records():
    arch, frame = _frame_layout()
    if frame is None:
        raise gdb.GdbError("karui: no saved-context layout for %s (only %s)"
                           % (arch, ", ".join(FRAMES)))
    recs = live_records()
    byid = {}
    for r in recs:
        byid.setdefault(int(_mp_ptr(r)["id"]), r)
    return recs, byid


def _select(rec):
    global _selected
    _selected = Saved(rec, _frame_layout()[1]) if rec is not None else None
    gdb.invalidate_cached_frames()


def _frames_of(rec, limit=64):
    """(level, pc, function, file:line) of a saved context's frames."""
    _select(rec)
    out = []
    try:
        f = gdb.newest_frame().older()
        n = 0
        while f is not None and n < limit:
            pc = f.pc()
            name = f.name() or _fn_name(pc)
            sal = f.find_sal()
            where = ""
            if sal.symtab is not None:
                where = "%s:%d" % (sal.symtab.fullname(), sal.line)
            out.append((n, pc, name, where))
            f = f.older()
            n += 1
    except gdb.error:
        pass
    return out


def _karui_src():
    """The directory of karui's sources (src/), from kr_init's symtab."""
    try:
        sym = gdb.lookup_global_symbol("kr_init")
        if sym is not None and sym.symtab is not None:
            import os
            return os.path.dirname(os.path.dirname(sym.symtab.fullname())) + "/"
    except (gdb.error, AttributeError):
        pass
    return None


def _waits_in(rec):
    """The innermost function outside karui of a switched-out context."""
    global _selected
    prev = _selected
    src = _karui_src()
    try:
        for _, _, name, where in _frames_of(rec, 24):
            if src and where.startswith(src):
                continue
            if name and not name.startswith("kr_") and name != "??":
                return name
    finally:
        _selected = prev
        gdb.invalidate_cached_frames()
    return "?"


class InfoMicroprocesses(gdb.Command):
    """info microprocesses: every live karui microprocess.
Columns: id, state, VP (running ones; '?' for the others: a switched-out
microprocess belongs to no VP), priority, entry function, and where a
switched-out one waits (its innermost function outside karui)."""

    def __init__(self):
        super().__init__("info microprocesses", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        recs, _ = _records()
        running = _running_on()
        print("%-6s %-9s %-4s %-5s %-24s %s" % ("Id", "State", "VP", "Prio", "Entry", "Waits in"))
        for r in recs:
            mp = _mp_ptr(r).dereference()
            st = state_of(r, running)
            vp = str(running[r]) if r in running else "?"
            if int(mp["is_main"]):
                entry = "(main)"
            elif st == "ended":
                entry = "?"
            else:
                entry = _fn_name(_u(mp["fn"].cast(gdb.lookup_type("unsigned long"))))
            if st in ("parked", "ready", "runnable", "notified"):
                waits = _waits_in(r)
            elif st == "running":
                waits = "(running: see its thread)"
            else:
                waits = "-"
            mark = "*" if _selected is not None and _selected_rec == r else " "
            print("%s%-5d %-9s %-4s %-5d %-24s %s" % (mark, int(mp["id"]), st, vp,
                                                     int(mp["prio"]), entry, waits))


_selected_rec = None


class Microprocess(gdb.Command):
    """microprocess N [bt [COUNT]]: select microprocess N (by its id), or
print its backtrace from its saved context.  `microprocess none` goes
back to the threads' own frames.  With N selected, frame 1 and the ones
above it are the microprocess's (frame 0 stays the thread's): frame,
up, down, print and info locals work there."""

    def __init__(self):
        super().__init__("microprocess", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        global _selected_rec
        argv = gdb.string_to_argv(arg)
        if not argv:
            if _selected_rec is None:
                print("No microprocess selected.")
            else:
                print("Microprocess %d selected." % int(_mp_ptr(_selected_rec)["id"]))
            return
        if argv[0] == "none":
            _selected_rec = None
            _select(None)
            return
        try:
            n = int(argv[0], 0)
        except ValueError:
            raise gdb.GdbError("usage: microprocess N [bt [COUNT]] | microprocess none")
        recs, byid = _records()
        if n not in byid:
            raise gdb.GdbError("karui: no live microprocess %d" % n)
        rec = byid[n]
        st = state_of(rec, _running_on())
        if st in ("running", "switching"):
            raise gdb.GdbError("karui: microprocess %d is %s: its frames are its thread's "
                               "(info threads, thread N, bt)" % (n, st))
        if st in ("ended", "new"):
            raise gdb.GdbError("karui: microprocess %d is %s: it has no frames" % (n, st))
        if len(argv) > 1 and argv[1] == "bt":
            limit = int(argv[2]) if len(argv) > 2 else 64
            prev = _selected_rec
            frames = _frames_of(rec, limit)
            _select(prev)
            for lvl, pc, name, where in frames:
                print("#%-2d 0x%016x in %s ()%s" % (lvl, pc, name, (" at " + where) if where else ""))
            return
        if Unwinder is None:
            raise gdb.GdbError("karui: this gdb has no Python unwinder API")
        _selected_rec = rec
        _select(rec)
        gdb.execute("frame 1", from_tty)


InfoMicroprocesses()
Microprocess()
