/*
 * LD_PRELOAD library for the live Slurm harness (tests/helpers/slurm_cluster.py).
 *
 * slurmd reads its node's memory with sysconf(_SC_PHYS_PAGES) (Slurm 22.05: src/slurmd/slurmd/get_mach_stat.c,
 * get_memory). With RAILFORGE_NODE_MEMTOTAL_MIB set, that call answers the given MiB instead, so a slurmd on a
 * small test machine reports the memory Linux reports on the server it stands for, and slurmctld's own
 * registration check ("Low RealMemory") compares it with the node's RealMemory. Every other call goes to libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

long sysconf(int name)
{
	static long (*real_sysconf)(int);
	const char *mib;

	if (!real_sysconf)
		real_sysconf = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	if (name == _SC_PHYS_PAGES) {
		mib = getenv("RAILFORGE_NODE_MEMTOTAL_MIB");
		if (mib && *mib)
			return (long)(strtoll(mib, NULL, 10) * 1048576LL / real_sysconf(_SC_PAGESIZE));
	}
	return real_sysconf(name);
}
