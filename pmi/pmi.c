/*
 * pmi.c - PMI-1 wire-protocol client.
 *
 * The protocol is line oriented: one request line "cmd=NAME k=v k=v\n", one
 * reply line, in lock step.  Hydra's mpiexec and rdmach_launch (launch.c)
 * hand every process a connected socket as PMI_FD, with PMI_RANK and
 * PMI_SIZE.  Requests used here:
 *   init pmi_version=1 pmi_subversion=1 -> response_to_init ... rc=0
 *   get_maxes                           -> maxes kvsname_max= keylen_max= vallen_max=
 *   get_my_kvsname                      -> my_kvsname kvsname=
 *   put kvsname= key= value=            -> put_result rc=0
 *   barrier_in                          -> barrier_out [rc= msg=]
 *   get kvsname= key=                   -> get_result rc= [msg=] value=
 *   abort exitcode=                     (no reply)
 *   finalize                            -> finalize_ack
 * The server's maxima count the terminating NUL, so the longest value that
 * survives the exchange is vallen_max - 1 (Hydra silently truncates longer
 * ones: we refuse them instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "pmi_wire.h"
#include "rdmach_pmi.h"

#define PMI_LINE_SLACK 512	/* room for "cmd=... kvsname=... key=" */

struct rdmach_pmi {
	int fd;
	int rank;
	int size;
	size_t kvsname_max;	/* server maxima, NUL included */
	size_t keylen_max;
	size_t vallen_max;
	char *kvsname;
	char *buf;		/* received bytes not yet consumed */
	size_t buf_len;
	size_t buf_cap;
	size_t buf_used;	/* length of the line handed out last */
};

int rdmach_pmi_available(void)
{
	const char *s = getenv("PMI_FD");

	return s && *s;
}

static int pmi_env_int(const char *name, int min, int *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s) {
		rdmach_err("PMI: %s is not set (not started by mpiexec or rdmach_run?)",
			   name);
		return -EINVAL;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > 0x7fffffff) {
		rdmach_err("PMI: bad %s=\"%s\"", name, s);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

static int pmi_write_all(struct rdmach_pmi *pmi, const char *p, size_t len,
			 const char *what)
{
	while (len) {
		ssize_t n = send(pmi->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(pmi->fd, p, len);
		if (n < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			if (err == EPIPE || err == ECONNRESET) {
				rdmach_err("PMI %s: the PMI server closed the connection",
					   what);
				return -ECONNRESET;
			}
			rdmach_err("PMI %s: write to PMI_FD %d failed: %s", what,
				   pmi->fd, strerror(err));
			return -err;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read one reply line (NUL-terminated, without '\n') into pmi->buf. */
static int pmi_read_line(struct rdmach_pmi *pmi, char **linep, const char *what)
{
	size_t line_max = pmi->vallen_max + pmi->keylen_max + pmi->kvsname_max +
			  PMI_LINE_SLACK;

	if (pmi->buf_used) {
		pmi->buf_len -= pmi->buf_used;
		memmove(pmi->buf, pmi->buf + pmi->buf_used, pmi->buf_len);
		pmi->buf_used = 0;
	}
	for (;;) {
		char *nl = memchr(pmi->buf, '\n', pmi->buf_len);
		ssize_t n;

		if (nl) {
			*nl = '\0';
			pmi->buf_used = (size_t)(nl - pmi->buf) + 1;
			*linep = pmi->buf;
			return 0;
		}
		if (pmi->buf_len + 1 >= pmi->buf_cap) {
			size_t cap = pmi->buf_cap * 2;
			char *b;

			if (pmi->buf_cap >= line_max) {
				rdmach_err("PMI %s: reply longer than %zu bytes", what,
					   line_max);
				return -EPROTO;
			}
			b = realloc(pmi->buf, cap);
			if (!b)
				return -ENOMEM;
			pmi->buf = b;
			pmi->buf_cap = cap;
		}
		n = read(pmi->fd, pmi->buf + pmi->buf_len,
			 pmi->buf_cap - pmi->buf_len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			rdmach_err("PMI %s: read from PMI_FD %d failed: %s", what,
				   pmi->fd, strerror(err));
			return err == ECONNRESET ? -ECONNRESET : -err;
		}
		if (n == 0) {
			rdmach_err("PMI %s: PMI server closed the connection", what);
			return -ECONNRESET;
		}
		pmi->buf_len += (size_t)n;
	}
}

/* Non-zero rc in a reply, or 0 when the reply carries none. */
static int pmi_rc(const struct pmi_wire_msg *rep)
{
	const char *rc = pmi_wire_attr(rep, "rc");

	return rc ? atoi(rc) : 0;
}

static const char *pmi_msg(const struct pmi_wire_msg *rep)
{
	const char *msg = pmi_wire_attr(rep, "msg");

	return msg ? msg : "no message";
}

static int pmi_send(struct rdmach_pmi *pmi, const char *what,
		    const char *fmt, va_list ap)
{
	va_list ap2;
	char *line;
	int len, ret;

	va_copy(ap2, ap);
	len = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (len < 0)
		return -EINVAL;
	line = malloc((size_t)len + 2);
	if (!line)
		return -ENOMEM;
	vsnprintf(line, (size_t)len + 1, fmt, ap);
	line[len] = '\n';
	ret = pmi_write_all(pmi, line, (size_t)len + 1, what);
	free(line);
	return ret;
}

static int pmi_send_line(struct rdmach_pmi *pmi, const char *what,
			 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pmi_send_line(struct rdmach_pmi *pmi, const char *what,
			 const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = pmi_send(pmi, what, fmt, ap);
	va_end(ap);
	return ret;
}

/* Send a request and read a reply whose cmd must be `expect`. */
static int pmi_call(struct rdmach_pmi *pmi, const char *what,
		    const char *expect, struct pmi_wire_msg *rep,
		    const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int pmi_call(struct rdmach_pmi *pmi, const char *what,
		    const char *expect, struct pmi_wire_msg *rep,
		    const char *fmt, ...)
{
	const char *cmd;
	va_list ap;
	char *line = NULL;
	int ret;

	va_start(ap, fmt);
	ret = pmi_send(pmi, what, fmt, ap);
	va_end(ap);
	if (ret)
		return ret;
	ret = pmi_read_line(pmi, &line, what);
	if (ret)
		return ret;
	rdmach_debug("PMI %s: reply \"%.200s\"", what, line);
	ret = pmi_wire_parse(line, rep);
	cmd = ret ? NULL : pmi_wire_attr(rep, "cmd");
	if (!cmd || strcmp(cmd, expect)) {
		rdmach_err("PMI %s: expected cmd=%s from the PMI server, got cmd=%s",
			   what, expect, cmd ? cmd : "(unparsable line)");
		return -EPROTO;
	}
	return 0;
}

static int pmi_size_attr(const struct pmi_wire_msg *rep, const char *key,
			 size_t min, size_t *out)
{
	const char *s = pmi_wire_attr(rep, key);
	long v = s ? atol(s) : 0;

	if (v < (long)min) {
		rdmach_err("PMI get_maxes: bad or missing %s=%s", key, s ? s : "");
		return -EPROTO;
	}
	*out = (size_t)v;
	return 0;
}

/* Keys and values travel as space-separated tokens. */
static int pmi_check_token(const char *what, const char *s, size_t max,
			   int is_key)
{
	size_t len = strlen(s);
	const char *p;

	if (is_key && !len) {
		rdmach_err("PMI %s: empty key", what);
		return -EINVAL;
	}
	if (len > max) {
		rdmach_err("PMI %s: %s of %zu bytes exceeds the PMI server's limit of %zu",
			   what, is_key ? "key" : "value", len, max);
		return -EMSGSIZE;
	}
	for (p = s; *p; p++) {
		if (*p <= ' ' || *p == 0x7f || (is_key && *p == '=')) {
			rdmach_err("PMI %s: character 0x%02x at offset %zu of a %s is not allowed",
				   what, (unsigned char)*p, (size_t)(p - s),
				   is_key ? "key" : "value");
			return -EINVAL;
		}
	}
	return 0;
}

static int pmi_oob_put(void *arg, const char *key, const char *value)
{
	struct rdmach_pmi *pmi = arg;
	struct pmi_wire_msg rep;
	int ret;

	if (!pmi || !key || !value)
		return -EINVAL;
	ret = pmi_check_token("put", key, pmi->keylen_max - 1, 1);
	if (!ret)
		ret = pmi_check_token("put", value, pmi->vallen_max - 1, 0);
	if (ret)
		return ret;
	ret = pmi_call(pmi, "put", "put_result", &rep,
		       "cmd=put kvsname=%s key=%s value=%s", pmi->kvsname, key,
		       value);
	if (ret)
		return ret;
	if (pmi_rc(&rep)) {
		rdmach_err("PMI put of key %s failed: rc=%d (%s)", key,
			   pmi_rc(&rep), pmi_msg(&rep));
		return -EIO;
	}
	return 0;
}

static int pmi_oob_fence(void *arg)
{
	return rdmach_pmi_barrier(arg);
}

static int pmi_oob_get(void *arg, const char *key, char *value, size_t len)
{
	struct rdmach_pmi *pmi = arg;
	struct pmi_wire_msg rep;
	const char *val;
	size_t vlen;
	int ret;

	if (!pmi || !key || !value || !len)
		return -EINVAL;
	ret = pmi_check_token("get", key, pmi->keylen_max - 1, 1);
	if (ret)
		return ret;
	ret = pmi_call(pmi, "get", "get_result", &rep,
		       "cmd=get kvsname=%s key=%s", pmi->kvsname, key);
	if (ret)
		return ret;
	if (pmi_rc(&rep)) {
		rdmach_err("PMI get of key %s failed: rc=%d (%s)", key,
			   pmi_rc(&rep), pmi_msg(&rep));
		return -ENOENT;
	}
	val = pmi_wire_attr(&rep, "value");
	if (!val) {
		rdmach_err("PMI get of key %s: reply without a value", key);
		return -EPROTO;
	}
	vlen = strlen(val);
	if (vlen >= len) {
		rdmach_err("PMI get of key %s: value of %zu bytes does not fit a buffer of %zu",
			   key, vlen, len);
		return -EMSGSIZE;
	}
	memcpy(value, val, vlen + 1);
	return 0;
}

int rdmach_pmi_barrier(rdmach_pmi_t *pmi)
{
	struct pmi_wire_msg rep;
	int ret;

	if (!pmi)
		return -EINVAL;
	ret = pmi_call(pmi, "barrier", "barrier_out", &rep, "cmd=barrier_in");
	if (ret)
		return ret;
	if (pmi_rc(&rep)) {
		rdmach_err("PMI barrier failed: rc=%d (%s)", pmi_rc(&rep),
			   pmi_msg(&rep));
		return -ECONNRESET;
	}
	return 0;
}

/* init, get_maxes, get_my_kvsname. */
static int pmi_handshake(struct rdmach_pmi *pmi)
{
	struct pmi_wire_msg rep;
	const char *name;
	int ret;

	ret = pmi_call(pmi, "init", "response_to_init", &rep,
		       "cmd=init pmi_version=1 pmi_subversion=1");
	if (ret)
		return ret;
	if (pmi_rc(&rep)) {
		rdmach_err("PMI init refused by the server: rc=%d (%s)",
			   pmi_rc(&rep), pmi_msg(&rep));
		return -EPROTO;
	}
	ret = pmi_call(pmi, "get_maxes", "maxes", &rep, "cmd=get_maxes");
	if (!ret)
		ret = pmi_size_attr(&rep, "kvsname_max", 2, &pmi->kvsname_max);
	if (!ret)
		ret = pmi_size_attr(&rep, "keylen_max", 2, &pmi->keylen_max);
	if (!ret)
		ret = pmi_size_attr(&rep, "vallen_max", 2, &pmi->vallen_max);
	if (ret)
		return ret;
	ret = pmi_call(pmi, "get_my_kvsname", "my_kvsname", &rep,
		       "cmd=get_my_kvsname");
	if (ret)
		return ret;
	name = pmi_wire_attr(&rep, "kvsname");
	if (!name || !*name || strlen(name) >= pmi->kvsname_max) {
		rdmach_err("PMI get_my_kvsname: bad kvsname in the reply");
		return -EPROTO;
	}
	pmi->kvsname = strdup(name);
	return pmi->kvsname ? 0 : -ENOMEM;
}

static void pmi_free(struct rdmach_pmi *pmi)
{
	if (pmi->fd >= 0)
		close(pmi->fd);
	free(pmi->kvsname);
	free(pmi->buf);
	free(pmi);
}

int rdmach_pmi_init(rdmach_pmi_t **pmip, rdmach_oob_t *oob)
{
	struct rdmach_pmi *pmi;
	int fd, ret;

	if (!pmip || !oob)
		return -EINVAL;
	pmi = calloc(1, sizeof(*pmi));
	if (!pmi)
		return -ENOMEM;
	pmi->fd = -1;
	/* Until get_maxes answers: PMI-1's smallest limits. */
	pmi->kvsname_max = 256;
	pmi->keylen_max = 64;
	pmi->vallen_max = 256;
	pmi->buf_cap = 1024;
	pmi->buf = malloc(pmi->buf_cap);
	if (!pmi->buf) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = pmi_env_int("PMI_FD", 0, &fd);
	if (!ret)
		ret = pmi_env_int("PMI_RANK", 0, &pmi->rank);
	if (!ret)
		ret = pmi_env_int("PMI_SIZE", 1, &pmi->size);
	if (ret)
		goto err_free;
	if (pmi->rank >= pmi->size) {
		rdmach_err("PMI: PMI_RANK=%d is not below PMI_SIZE=%d", pmi->rank,
			   pmi->size);
		ret = -EINVAL;
		goto err_free;
	}
	/* Programs this rank execs must not inherit the connection. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		rdmach_err("PMI: PMI_FD=%d is not an open file descriptor: %s", fd,
			   strerror(errno));
		ret = -EBADF;
		goto err_free;
	}
	pmi->fd = fd;
	if (rdmach_log_rank < 0)
		rdmach_log_rank = pmi->rank;
	ret = pmi_handshake(pmi);
	if (ret)
		goto err_free;
	rdmach_debug("PMI: rank %d of %d, kvs %s, vallen_max %zu", pmi->rank,
		     pmi->size, pmi->kvsname, pmi->vallen_max);

	memset(oob, 0, sizeof(*oob));
	oob->rank = pmi->rank;
	oob->size = pmi->size;
	oob->value_max = pmi->vallen_max - 1;
	oob->arg = pmi;
	oob->put = pmi_oob_put;
	oob->fence = pmi_oob_fence;
	oob->get = pmi_oob_get;
	*pmip = pmi;
	return 0;

err_free:
	pmi_free(pmi);
	return ret;
}

int rdmach_pmi_abort(rdmach_pmi_t *pmi, int exit_code, const char *msg)
{
	char text[256];
	size_t i;

	if (!pmi)
		return -EINVAL;
	/* The message travels as one token: blanks become '_'. */
	snprintf(text, sizeof(text), "%s", msg ? msg : "");
	for (i = 0; text[i]; i++)
		if (text[i] <= ' ' || text[i] == 0x7f)
			text[i] = '_';
	return pmi_send_line(pmi, "abort", "cmd=abort exitcode=%d%s%s",
			     exit_code, text[0] ? " message=" : "", text);
}

int rdmach_pmi_finalize(rdmach_pmi_t *pmi)
{
	struct pmi_wire_msg rep;
	int ret;

	if (!pmi)
		return -EINVAL;
	ret = pmi_call(pmi, "finalize", "finalize_ack", &rep, "cmd=finalize");
	pmi_free(pmi);
	return ret;
}
