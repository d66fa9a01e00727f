#!/usr/bin/env python3
# karui-sh on a terminal (a pty): Ctrl-C and Ctrl-\ end the command running
# in the foreground, μprocesses and child processes alike, with the status
# bash gives (130, 131), and not the shell, a μprocess that makes no system
# call too; at the prompt they do nothing.
# A missed signal shows as a wait of 30 s and a failure, never a hang.
#   interrupt.py KARUI-SH [EMULATOR...]   (an emulator: qemu-user)
import os
import pty
import select
import sys
import tempfile
import time

ksh = sys.argv[1]
cmd = [a for a in sys.argv[2:] if a] + [ksh]
pid, fd = pty.fork()
if pid == 0:
    os.environ["PS1"] = "$ "
    os.execvp(cmd[0], cmd)

out = b""
passed = failed = 0


def expect(text, what):
    """Read the terminal until text appears; report what as ok or FAIL."""
    global out, passed, failed
    end = time.monotonic() + 30
    while text.encode() not in out:
        left = end - time.monotonic()
        r = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
        if not r:
            print(f"FAIL    {what}: no {text!r} in {out[-300:]!r}")
            failed += 1
            return
        try:
            out += os.read(fd, 4096)
        except OSError:
            print(f"FAIL    {what}: the shell is gone; {out[-300:]!r}")
            sys.exit(1)
    out = out[out.index(text.encode()) + len(text):]
    if not what.endswith("(prompt)"):
        passed += 1
        print(f"ok      {what}")


def send(s):
    os.write(fd, s.encode())


def interrupt(line, key, status, what):
    send(line + "\n")
    time.sleep(0.3)  # let it start; a key pressed earlier still reaches it
    send(key)
    expect(PROMPT, what + " (prompt)")  # typed ahead, the next line could
    send('echo "status=$?"\n')          # go to a reader that is ending
    expect(f"status={status}", what)
    expect(PROMPT, what + " (prompt)")


# a #! script runs as a child process
script = os.path.join(tempfile.mkdtemp(), "nap")
with open(script, "w") as f:
    f.write("#!/bin/sh\nexec sleep 100\n")
os.chmod(script, 0o755)

PROMPT = "$ "
expect(PROMPT, "the_shell_prompts")
send("\x03")
send("echo alive\n")
expect("alive", "ctrl_c_at_the_prompt_leaves_the_shell")
expect(PROMPT, "ctrl_c_at_the_prompt_leaves_the_shell (prompt)")
interrupt("sleep 100", "\x03", 130, "ctrl_c_ends_a_sleeping_uproc_with_130")
interrupt("cat | cat", "\x1c", 131, "ctrl_backslash_ends_a_pipeline_reading_the_terminal_with_131")
interrupt(script, "\x03", 130, "ctrl_c_ends_a_child_process_too")
interrupt("yes | cat >/dev/null", "\x03", 130, "ctrl_c_ends_a_busy_pipeline")
# a μprocess that computes without making a system call (tests/uproc_probe.c;
# not under an emulator, where the probe is built for another machine)
probe = os.path.join(os.path.dirname(os.path.abspath(ksh)), "uproc_probe")
if os.path.exists(probe) and len(cmd) == 1:
    interrupt(probe + " loop-forever", "\x03", 130,
              "ctrl_c_ends_a_uproc_that_makes_no_system_call")
os.unlink(script)
os.rmdir(os.path.dirname(script))
send("exit 7\n")
_, st = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(st)
if code == 7:
    passed += 1
    print("ok      the_shell_goes_on_to_its_own_exit")
else:
    print(f"FAIL    the_shell_goes_on_to_its_own_exit: status {code}")
    failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
