"""dpdpca.commands"""
