int cdp_pmpi_placeholder;
