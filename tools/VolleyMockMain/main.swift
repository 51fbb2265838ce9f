print("volley-mock: waiting for transport")
