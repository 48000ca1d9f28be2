/* placeholder */ typedef int cdp_placeholder_comm;
