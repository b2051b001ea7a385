"""dpdpca.dp"""
