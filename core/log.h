/* log.h - messages on stderr, prefixed "rdmach[rank]:".  Errors always
 * print; RDMACH_VERBOSE=1 adds info, 2 adds debug. */
#ifndef RDMACH_CORE_LOG_H
#define RDMACH_CORE_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum { RDMACH_LOG_ERROR, RDMACH_LOG_WARN, RDMACH_LOG_INFO, RDMACH_LOG_DEBUG };

extern int rdmach_log_level;	/* from RDMACH_VERBOSE */
extern int rdmach_log_rank;	/* -1 before init */

void rdmach_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* s made printable for a message (a foreign string: a peer's or a
 * server's): bytes outside ' '..'~', and '\\', become \xHH, so that no
 * control character reaches a terminal; longer than len - 1 bytes, cut
 * and ended with "...".  Returns buf. */
const char *rdmach_log_esc(const char *s, char *buf, size_t len);

#define rdmach_err(...) rdmach_log(RDMACH_LOG_ERROR, __VA_ARGS__)
#define rdmach_warn(...) rdmach_log(RDMACH_LOG_WARN, __VA_ARGS__)
#define rdmach_info(...)                                              \
	do {                                                          \
		if (rdmach_log_level >= RDMACH_LOG_INFO)              \
			rdmach_log(RDMACH_LOG_INFO, __VA_ARGS__);     \
	} while (0)
#define rdmach_debug(...)                                             \
	do {                                                          \
		if (rdmach_log_level >= RDMACH_LOG_DEBUG)             \
			rdmach_log(RDMACH_LOG_DEBUG, __VA_ARGS__);    \
	} while (0)

/* CLOCK_MONOTONIC in ns (vDSO: no system call). */
static inline uint64_t rdmach_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same in seconds (measurements kept as durations and rates in s). */
static inline double rdmach_now_s(void)
{
	return (double)rdmach_now_ns() / 1e9;
}

/* A duration in ns as a struct timespec (nanosleep, futex timeouts). */
static inline struct timespec rdmach_timespec_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	return ts;
}

#endif /* RDMACH_CORE_LOG_H */
