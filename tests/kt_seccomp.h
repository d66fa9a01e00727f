/*
 * A seccomp filter for tests that play a kernel without some feature: the
 * system call `nr` fails with `err` from now on, in this process and in
 * every child it forks; with `arg` >= 0, only when the low 32 bits of
 * argument `arg` equal `val` (both architectures are little-endian).
 * Returns 0, or why the filter could not be installed.
 */
#ifndef KARUI_KT_SECCOMP_H
#define KARUI_KT_SECCOMP_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#if defined(__x86_64__)
#define KT_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define KT_NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

static int kt_seccomp_deny(unsigned nr, int arg, unsigned val, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KT_NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, args[arg < 0 ? 0 : arg])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, val, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	if (arg < 0) /* any argument: jump straight to the refusal */
		f[4] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 2, 3);
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return errno;
	return 0;
}

#endif
