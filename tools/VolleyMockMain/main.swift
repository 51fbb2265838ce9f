print("volley-mock: not built yet")
