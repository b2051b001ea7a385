"""dpdpca.baselines"""
