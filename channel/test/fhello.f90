! fhello.f90 - Fortran through the mpif90 of the ch3:rdma MPICH: a
! reduction and a ring exchange checked on every rank.
program fhello
  use mpi
  implicit none
  integer :: ierr, rank, np, total, got, next, prev
  integer :: status(MPI_STATUS_SIZE)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  next = mod(rank + 1, np)
  prev = mod(rank + np - 1, np)
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, next, 5, got, 1, MPI_INTEGER, prev, 5, &
                    MPI_COMM_WORLD, status, ierr)
  if (total /= np * (np + 1) / 2 .or. got /= prev) then
     print *, 'rank', rank, ': wrong result', total, got
     call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print *, 'No Errors'
  call MPI_Finalize(ierr)
end program fhello
