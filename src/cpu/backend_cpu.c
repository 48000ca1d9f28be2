/* placeholder */ typedef int cdp_placeholder_backend_cpu;
