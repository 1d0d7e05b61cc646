// VK_KHR_cooperative_matrix's API (Vulkan headers 1.3.255 and later), declared
// here for older headers (Debian 12 ships 1.3.239): the values and layouts are
// the registry's. The plugin queries the device's supported shapes with it
// (device.cpp) and runs the matmul_coopmat.comp modules where 16 x 16 x 16
// f16 x f16 -> f32 at subgroup scope is listed.
#pragma once
#include "vk_loader.h"

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)

typedef enum VkComponentTypeKHR {
  VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
  VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
  VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;

typedef enum VkScopeKHR {
  VK_SCOPE_DEVICE_KHR = 1,
  VK_SCOPE_WORKGROUP_KHR = 2,
  VK_SCOPE_SUBGROUP_KHR = 3,
  VK_SCOPE_QUEUE_FAMILY_KHR = 5,
  VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;

typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize;
  uint32_t NSize;
  uint32_t KSize;
  VkComponentTypeKHR AType;
  VkComponentTypeKHR BType;
  VkComponentTypeKHR CType;
  VkComponentTypeKHR ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;

typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;

typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount, VkCooperativeMatrixPropertiesKHR* pProperties);
#endif
