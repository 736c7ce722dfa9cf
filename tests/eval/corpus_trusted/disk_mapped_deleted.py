# threat: resources: fills the host's disk where neither the disk walk nor a descriptor shows it: a
# 64 MB file in its scratch folder, mapped shared, closed and unlinked, written through the mapping and
# its pages dropped from memory (on disk, no name, no descriptor, no RSS), over a 16 MB disk limit
# task: smoke/5
# expect: runtime_error/disk_limit
# limits: disk_mb=16
import ctypes
import mmap
import os
import time

SIZE = 64 << 20
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open("pikeh-mapped", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, SIZE)
address = libc.mmap(None, SIZE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
os.close(fd)
os.unlink("pikeh-mapped")
ctypes.memset(address, 0x5A, SIZE)
libc.msync(address, SIZE, 4)  # MS_SYNC: on disk
libc.madvise(address, SIZE, 4)  # MADV_DONTNEED: out of the process's memory
time.sleep(100)
