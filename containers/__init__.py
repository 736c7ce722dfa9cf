"""Data package for the worker's image definitions (installed as ``pikeh_containers``).

Nothing here is imported as code: ``pikeh worker image build`` reads the Dockerfiles and the
Apptainer definition from this folder, in a source checkout and in an installed wheel alike.
"""
