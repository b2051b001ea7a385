"""dpdpca.bench"""
