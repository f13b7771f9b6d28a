/*
 * fuzz_pmi_reply - the PMI-1 client (pmi/pmi.c, pmi/pmi_wire.c, linked as
 * they are) reading a server's replies.  The input is what the server
 * says: its replies separated by NUL bytes, each sent verbatim (a reply
 * may hold several lines) once the client's next request line has come; a
 * piece that does not end in a newline is followed at once by the next, as
 * the rest of its line.  After the last the server closes its side.  The client runs init
 * (init, get_maxes, get_my_kvsname), put, get, barrier and finalize.  It
 * must fail cleanly or return values that fit; the sanitizers catch the
 * rest.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmach_pmi.h"

#define FUZZ_PMI_FD 200		/* the client's end: PMI_FD */
#define FUZZ_MAX_INPUT (1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_server {
	int fd;
	const uint8_t *data;
	size_t size;
};

/* Wait for one request line: 0, or -1 when the client has closed. */
static int fuzz_read_request(int fd)
{
	char c;

	do {
		if (read(fd, &c, 1) != 1)
			return -1;
	} while (c != '\n');
	return 0;
}

static void *fuzz_serve(void *arg)
{
	struct fuzz_server *s = arg;
	const uint8_t *p = s->data, *end = s->data + s->size;

	int line_done = 1;	/* the client has a whole line to act on */

	while (p < end && (!line_done || !fuzz_read_request(s->fd))) {
		const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
		size_t len = (size_t)((nul ? nul : end) - p);

		/* a client that stopped reading closed its end: EPIPE */
		if (len && send(s->fd, p, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
		line_done = len && p[len - 1] == '\n';
		p += len + (nul != NULL);
	}
	shutdown(s->fd, SHUT_WR);
	while (!fuzz_read_request(s->fd))
		;
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char fd[16];

	snprintf(fd, sizeof(fd), "%d", FUZZ_PMI_FD);
	setenv("PMI_FD", fd, 1);
	setenv("PMI_RANK", "0", 1);
	setenv("PMI_SIZE", "2", 1);
	/* the server answers or closes at once: a wait this long is a bug */
	setenv("RDMACH_PMI_TIMEOUT_MS", "5000", 1);
	setenv("RDMACH_PMI_FENCE_TIMEOUT_MS", "5000", 1);
	return 0;
}

/* The client's calls after init; the values it returns must fit. */
static void fuzz_client_calls(rdmach_pmi_t *pmi, const rdmach_oob_t *oob)
{
	char value[300];

	if (oob->value_max < 1 || oob->rank != 0 || oob->size != 2)
		abort();
	oob->put(oob->arg, "key", "value");
	memset(value, 'Z', sizeof(value));
	if (!oob->get(oob->arg, "key", value, 64) && !memchr(value, 0, 64))
		abort();
	rdmach_pmi_barrier(pmi);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_server srv = { -1, data, size };
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	pthread_t thr;
	int sv[2];

	if (size > FUZZ_MAX_INPUT || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	srv.fd = sv[1];
	if (dup2(sv[0], FUZZ_PMI_FD) < 0 ||
	    pthread_create(&thr, NULL, fuzz_serve, &srv)) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	close(sv[0]);
	if (!rdmach_pmi_init(&pmi, &oob)) {
		fuzz_client_calls(pmi, &oob);
		rdmach_pmi_finalize(pmi);
	} else {
		close(FUZZ_PMI_FD);	/* a failed init closed it already */
	}
	pthread_join(thr, NULL);
	close(sv[1]);
	return 0;
}
