/* log.c - messages on stderr, one write() per line so that ranks sharing a
 * terminal do not interleave inside a line. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int rdmach_log_level = RDMACH_LOG_WARN;
int rdmach_log_rank = -1;

static const char *const log_level_names[] = { "error", "warning", "info",
					       "debug" };

void rdmach_log(int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > rdmach_log_level)
		return;
	if (rdmach_log_rank >= 0)
		n = snprintf(line, sizeof(line), "rdmach[%d]: %s: ",
			     rdmach_log_rank, log_level_names[level]);
	else
		n = snprintf(line, sizeof(line), "rdmach: %s: ",
			     log_level_names[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;	/* nowhere left to report it */
}

const char *rdmach_log_esc(const char *s, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (len < 4)
		return len ? (buf[0] = '\0', buf) : "";
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		int plain = ch >= ' ' && ch < 0x7f && ch != '\\';
		/* room for this byte, and for "..." unless it is the last */
		size_t room = n + (plain ? 1 : 4) + (s[1] ? 3 : 0) + 1;

		if (room > len) {
			memcpy(buf + n, "...", 4);
			return buf;
		}
		if (plain) {
			buf[n++] = (char)ch;
			continue;
		}
		buf[n++] = '\\';
		buf[n++] = 'x';
		buf[n++] = hex[ch >> 4];
		buf[n++] = hex[ch & 15];
	}
	buf[n] = '\0';
	return buf;
}
