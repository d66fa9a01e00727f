/* A program built against an installed karui (tests/test_install.sh): the
 * headers and the library agree on the version, and a microprocess runs on
 * two VPs and hands back its result. */
#include <karui.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void *twice(void *arg)
{
	return (void *)(2 * (intptr_t)arg);
}

int main(void)
{
	if (strcmp(KARUI_VERSION_STRING, kr_version()) != 0) {
		fprintf(stderr, "headers %s, library %s\n", KARUI_VERSION_STRING,
			kr_version());
		return 1;
	}
	kr_config cfg = {.vps = 2};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "kr_init: %s\n", strerror(err));
		return 1;
	}
	kr_mp *m;
	void *r = NULL;
	if ((err = kr_mp_create(&m, NULL, twice, (void *)21)) ||
	    (err = kr_mp_join(m, &r))) {
		fprintf(stderr, "kr_mp_create/join: %s\n", strerror(err));
		return 1;
	}
	if ((err = kr_fini())) {
		fprintf(stderr, "kr_fini: %s\n", strerror(err));
		return 1;
	}
	printf("karui %s (%d): a microprocess returned %d\n", kr_version(),
	       KARUI_VERSION, (int)(intptr_t)r);
	return (intptr_t)r == 42 ? 0 : 1;
}
