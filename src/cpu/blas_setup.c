/* placeholder */ typedef int cdp_placeholder_blas_setup;
