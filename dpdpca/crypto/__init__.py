"""dpdpca.crypto"""
