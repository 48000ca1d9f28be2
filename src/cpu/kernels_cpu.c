/* placeholder */ typedef int cdp_placeholder_kernels_cpu;
