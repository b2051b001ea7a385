"""dpdpca.data"""
