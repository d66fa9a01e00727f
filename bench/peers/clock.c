/*
 * Timing and memory helpers shared by the peers: kb_now_ns reads
 * CLOCK_MONOTONIC; kb_rss_kib reads VmRSS from /proc/self/status
 * (returns -1 if it cannot be read); kb_cg_on is the state of the t1_*
 * experiments' callgrind marks (peers.h).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "peers.h"

int kb_cg_on;

double kb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double kb_rss_kib(void)
{
	char line[256];
	double kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			if (sscanf(line + 6, "%lf", &kib) != 1)
				kib = -1;
			break;
		}
	}
	fclose(f);
	return kib;
}
