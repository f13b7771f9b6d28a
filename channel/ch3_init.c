/*
 * ch3_init.c - CH3 channel "rdma": initialisation, finalisation, VC and
 * process-group hooks, and the (unsupported) dynamic-process entry points.
 *
 * MPI_Init: rdmach_init + rdmach_connect over PMI (shared memory on the
 * same host, InfiniBand/RoCE otherwise, or as RDMACH_TRANSPORT says; ib
 * pairs at their first message under RDMACH_CONNECT=demand).  A VC becomes
 * active when it is used: at its first send, or when rdmach reports that
 * the peer connected (ch3_progress.c).
 */
#include "mpidi_ch3_impl.h"

#include <errno.h>

char MPIDI_CH3_ABIVersion[] = "1.1";

rdmach_ctx_t *MPIDI_CH3I_rdma_ctx;

static int rdma_fail(const char *what, int err)
{
	int mpi_errno = MPI_SUCCESS;
	char msg[256];

	snprintf(msg, sizeof(msg), "ch3:rdma: %s failed: %s", what, rdmach_strerror(err));
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", msg);
	return mpi_errno;
}

static int vc_attach(MPIDI_VC_t *vc, int rank)
{
	int rc = rdmach_conn(MPIDI_CH3I_rdma_ctx, rank, &vc->ch.conn);

	if (rc < 0)
		return rdma_fail("rdmach_conn", rc);
	/* buffers and the ACTIVE state come with use (MPIDI_CH3I_Vc_activate) */
	vc->ch.rx_pos = vc->ch.rx_len = 0;
	vc->ch.rx_ahead = MPIDI_CH3I_Rx_staging_size();
	vc->ch.rx_in_place_min = MPIDI_CH3I_Rx_in_place_min();
	vc->ch.rx_peek = 0;
	vc->ch.rx_waited = 0;
	return MPI_SUCCESS;
}

int MPIDI_CH3_Init(int has_parent, MPIDI_PG_t *pg, int pg_rank)
{
	rdmach_oob_t oob;
	int mpi_errno = MPI_SUCCESS, rc;

	if (has_parent) {
		MPIR_ERR_SET1(mpi_errno, MPI_ERR_SPAWN, "**fail", "**fail %s",
			      "ch3:rdma does not support dynamic processes (MPI_Comm_spawn)");
		return mpi_errno;
	}
	mpi_errno = MPIDI_CH3I_Progress_init();
	if (mpi_errno)
		return mpi_errno;

	MPIDI_CH3I_Rdma_oob(&oob, pg_rank, pg->size);
	rc = rdmach_init(&MPIDI_CH3I_rdma_ctx, &oob);
	if (rc < 0)
		return rdma_fail("rdmach_init", rc);
	rc = rdmach_connect(MPIDI_CH3I_rdma_ctx);
	if (rc < 0)
		return rdma_fail("rdmach_connect", rc);

	mpi_errno = MPIDI_CH3I_Node_init(pg, pg_rank);
	if (mpi_errno)
		return mpi_errno;
	for (int i = 0; i < pg->size; i++) {
		mpi_errno = vc_attach(&pg->vct[i], i);
		if (mpi_errno)
			return mpi_errno;
	}
	return MPIDI_CH3I_Progress_connected();
}

int MPIDI_CH3_Finalize(void)
{
	int mpi_errno = MPIDI_CH3I_Rdma_flush();
	int rc;

	if (MPIDI_CH3I_rdma_ctx) {
		rc = rdmach_finalize(&MPIDI_CH3I_rdma_ctx);
		if (rc < 0 && !mpi_errno)
			mpi_errno = rdma_fail("rdmach_finalize", rc);
	}
	if (!mpi_errno)
		mpi_errno = MPIDI_CH3I_Progress_finalize();
	return mpi_errno;
}

int MPIDI_CH3_VC_Init(MPIDI_VC_t *vc)
{
	memset(&vc->ch, 0, sizeof(vc->ch));
	return MPI_SUCCESS;
}

int MPIDI_CH3_VC_Destroy(MPIDI_VC_t *vc)
{
	MPL_free(vc->ch.tx_pkt);
	MPL_free(vc->ch.rx_buf);
	vc->ch.rx_buf = NULL;
	vc->ch.tx_pkt = NULL;
	vc->ch.conn = NULL;
	return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Init(MPIDI_PG_t *pg)
{
	return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Destroy(MPIDI_PG_t *pg)
{
	return MPI_SUCCESS;
}

int MPIDI_CH3_InitCompleted(void)
{
	return MPI_SUCCESS;
}

/* ---- dynamic processes: not supported, with a clear error ---- */

static int no_dynamic(const char *fn)
{
	int mpi_errno = MPI_SUCCESS;
	char msg[200];

	snprintf(msg, sizeof(msg),
		 "%s: dynamic processes are not supported by the ch3:rdma channel "
		 "(all processes must be started by mpiexec)", fn);
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", msg);
	return mpi_errno;
}

static int open_port(MPIR_Info *info, char *port_name)
{
	return no_dynamic("MPI_Open_port");
}

static int close_port(const char *port_name)
{
	return no_dynamic("MPI_Close_port");
}

static int comm_accept(const char *port, MPIR_Info *info, int root, MPIR_Comm *comm,
		       MPIR_Comm **newcomm)
{
	return no_dynamic("MPI_Comm_accept");
}

static int comm_connect(const char *port, MPIR_Info *info, int root, MPIR_Comm *comm,
			MPIR_Comm **newcomm)
{
	return no_dynamic("MPI_Comm_connect");
}

int MPIDI_CH3_PortFnsInit(MPIDI_PortFns *fns)
{
	fns->OpenPort = open_port;
	fns->ClosePort = close_port;
	fns->CommAccept = comm_accept;
	fns->CommConnect = comm_connect;
	return MPI_SUCCESS;
}

int MPIDI_CH3_Get_business_card(int rank, char *value, int length)
{
	return no_dynamic("MPI_Open_port");
}
