/* placeholder */ typedef int cdp_placeholder_ckpt;
