/*
 * ch3_oob.c - CH3 channel "rdma": rdmach's out-of-band exchange on top of
 * MPICH's PMI key-value space (MPIR_pmi_*: PMI-1 under Hydra).
 */
#include "mpidi_ch3_impl.h"

#include <errno.h>

static int oob_put(void *arg, const char *key, const char *value)
{
	return MPIR_pmi_kvs_put(key, value) == MPI_SUCCESS ? 0 : -EIO;
}

static int oob_fence(void *arg)
{
	return MPIR_pmi_barrier() == MPI_SUCCESS ? 0 : -EIO;
}

static int oob_get(void *arg, const char *key, char *value, size_t len)
{
	if (len > INT_MAX)
		len = INT_MAX;
	return MPIR_pmi_kvs_get(-1, key, value, (int) len) == MPI_SUCCESS ? 0 : -ENOENT;
}

void MPIDI_CH3I_Rdma_oob(rdmach_oob_t *oob, int rank, int size)
{
	memset(oob, 0, sizeof(*oob));
	oob->rank = rank;
	oob->size = size;
	oob->value_max = (size_t) MPIR_pmi_max_val_size();
	oob->put = oob_put;
	oob->fence = oob_fence;
	oob->get = oob_get;
}
