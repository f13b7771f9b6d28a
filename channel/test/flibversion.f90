! flibversion.f90 - a Fortran program built with another MPICH of the same
! ABI (Debian's mpif90.mpich: libmpichfort.so.12, libmpich.so.12) runs on
! this one: MPI_Get_library_version must name the text given as the first
! argument (e.g. ch3:rdma), and a reduction, a ring exchange and a
! broadcast of 1000 doubles are checked on every rank.  Prints "No Errors".
!
!   LD_LIBRARY_PATH=PREFIX/lib mpiexec -n 2 ./flibversion ch3:rdma
program flibversion
  use mpi
  implicit none
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
  character(len=64) :: want
  integer :: ierr, rank, np, total, got, next, prev, vlen, i, bad
  integer :: status(MPI_STATUS_SIZE)
  double precision :: buf(1000)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  want = ''
  if (command_argument_count() >= 1) call get_command_argument(1, want)
  call MPI_Get_library_version(version, vlen, ierr)
  bad = 0
  if (len_trim(want) > 0) then
     if (index(version(1:vlen), trim(want)) == 0) then
        if (rank == 0) print *, 'library is not ', trim(want), ': ', version(1:vlen)
        bad = 1
     end if
  end if
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  next = mod(rank + 1, np)
  prev = mod(rank + np - 1, np)
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, next, 5, got, 1, MPI_INTEGER, prev, 5, &
                    MPI_COMM_WORLD, status, ierr)
  if (rank == 0) then
     do i = 1, 1000
        buf(i) = 0.5d0 * i
     end do
  else
     buf = -1d0
  end if
  call MPI_Bcast(buf, 1000, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  do i = 1, 1000
     if (buf(i) /= 0.5d0 * i) then
        print *, 'rank', rank, ': broadcast element', i, 'is', buf(i)
        bad = 1
        exit
     end if
  end do
  if (total /= np * (np + 1) / 2 .or. got /= prev) then
     print *, 'rank', rank, ': wrong result: sum', total, 'from left', got
     bad = 1
  end if
  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
     call MPI_Finalize(ierr)
     stop 1
  end if
  if (rank == 0) print '(a)', 'No Errors'
  call MPI_Finalize(ierr)
end program flibversion
