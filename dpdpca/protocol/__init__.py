"""dpdpca.protocol"""
