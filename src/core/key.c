/*
 * karui L2 — microprocess-local keys (like pthread keys).
 *
 * Why: a microprocess may move between VPs, so `thread_local` is the VP's,
 * not the microprocess's.  A key names one slot in every microprocess.
 *
 * A key is slot | generation << 8.  kr_key_delete bumps the slot's
 * generation, so values stored under a deleted key are never returned for a
 * new key that reuses the slot: each stored value carries the generation it
 * was stored under.  The generation is odd while the slot is in use and
 * counts modulo 2^24, what a kr_key has room for, so every key stays
 * valid however often its slot has been reused (a value kept through 2^23
 * deletions of its slot could come back, as with any count of fixed size).
 *
 * A microprocess's values live in a table allocated on its first
 * kr_key_set and freed when it ends (the main microprocess's at kr_fini),
 * after the destructors (up to KR_KEY_DTOR_ROUNDS rounds, as POSIX does,
 * since a destructor may store again).  The key table is guarded by a
 * mutex: creating and deleting keys is rare; get/set touch only the
 * caller's own table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

enum { KR_KEY_DTOR_ROUNDS = 4 };

struct kr_keyvals {
	struct {
		unsigned gen;
		void *v;
	} e[KR_KEYS_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define GEN_MASK 0xffffffu /* the bits of a kr_key above the slot's 8 */

static struct {
	unsigned gen; /* odd: in use; below 2^24 */
	void (*dtor)(void *);
} keys[KR_KEYS_MAX];

static kr_mp *self(void)
{
	struct kr_worker *w = KR_TLS_GET(kr__w);
	return w ? w->cur : NULL;
}

static int key_ok(kr_key k, unsigned *slot)
{
	unsigned s = k & 0xff, g = k >> 8;
	if (s >= KR_KEYS_MAX)
		return 0;
	*slot = s;
	return __atomic_load_n(&keys[s].gen, __ATOMIC_ACQUIRE) == g && (g & 1);
}

int kr_key_create(kr_key *key, void (*destructor)(void *))
{
	if (!key)
		return EINVAL;
	if (kr__forked)
		return EPERM;
	pthread_mutex_lock(&lock);
	for (unsigned s = 0; s < KR_KEYS_MAX; s++)
		if (!(keys[s].gen & 1)) {
			keys[s].dtor = destructor;
			__atomic_store_n(&keys[s].gen, (keys[s].gen + 1) & GEN_MASK, __ATOMIC_RELEASE);
			*key = s | keys[s].gen << 8;
			pthread_mutex_unlock(&lock);
			return 0;
		}
	pthread_mutex_unlock(&lock);
	return EAGAIN;
}

int kr_key_delete(kr_key key)
{
	unsigned s;
	if (kr__forked)
		return EPERM;
	pthread_mutex_lock(&lock);
	int ok = key_ok(key, &s);
	if (ok)
		__atomic_store_n(&keys[s].gen, (keys[s].gen + 1) & GEN_MASK, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return ok ? 0 : EINVAL;
}

int kr_key_set(kr_key key, const void *value)
{
	kr_mp *mp = self();
	if (!mp)
		return EPERM;
	unsigned s;
	if (!key_ok(key, &s))
		return EINVAL;
	if (!mp->keys && !(mp->keys = calloc(1, sizeof *mp->keys)))
		return ENOMEM;
	mp->keys->e[s].gen = key >> 8;
	mp->keys->e[s].v = (void *)value;
	return 0;
}

void *kr_key_get(kr_key key)
{
	kr_mp *mp = self();
	unsigned s;
	if (!mp || !mp->keys || !key_ok(key, &s) || mp->keys->e[s].gen != key >> 8)
		return NULL;
	return mp->keys->e[s].v;
}

void kr__keys_run_destructors(kr_mp *mp)
{
	for (int round = 0; round < KR_KEY_DTOR_ROUNDS; round++) {
		int again = 0;
		for (unsigned s = 0; s < KR_KEYS_MAX; s++) {
			void *v = mp->keys->e[s].v;
			unsigned g = mp->keys->e[s].gen;
			if (!v)
				continue;
			mp->keys->e[s].v = NULL;
			pthread_mutex_lock(&lock);
			void (*d)(void *) = keys[s].gen == g ? keys[s].dtor : NULL;
			pthread_mutex_unlock(&lock);
			if (d) {
				d(v);
				again = 1;
			}
		}
		if (!again)
			break;
	}
	free(mp->keys);
	mp->keys = NULL;
}
