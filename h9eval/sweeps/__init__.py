"""Grids of cells (tasks x policies x parameters x modes x summarizers x repeats), run in
parallel and resumably into one versioned results folder.

``spec`` parses and validates the TOML/dict spec; ``cells`` expands it into :class:`Cell` values
(with the cell hash that decides reuse); ``worker`` runs one cell; ``executors`` runs many (in
this process, a process pool, Dask); ``sweep`` ties them together and writes the manifest.
"""
